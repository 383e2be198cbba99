# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bench's prompt corpus: deterministic English-like text the collection generates.

llama-benchy cuts its prompts from a "book" it would otherwise download; lanekit writes this text
instead, so every run of every lane reads the same words (decode figures of speculative lanes
depend on the prompt) and nothing is fetched. The words are plain lower-case English, so any
real tokenizer splits them the usual way (the simulated checkpoint's tokenizer.json knows them all).
"""
from __future__ import annotations

import random

# Kept in step with tests/sim/make_checkpoint.py (CORPUS_WORDS); a unit test checks it.
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their been has when who will more no if out "
    "so said what up its about into than them can only other new some could time these two may then "
    "do first any my now such like our over man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life being "
    "under never day same another know while last might us great old year off come since against go "
    "came right used take three river city mountain garden letter window morning evening winter "
    "summer road house water light stone field friend story voice door table paper music market"
).split()

CORPUS_NAME = "lanekit-bench-corpus-v1.txt"


def corpus_text(n_words: int, seed: int = 42) -> str:
    """`n_words` words in sentences of 8 to 20 words and paragraphs of 5 sentences."""
    rng = random.Random(seed)
    out: list[str] = []
    count = 0
    sentence = 0
    while count < n_words:
        size = min(rng.randint(8, 20), n_words - count)
        words = [rng.choice(WORDS) for _unused in range(size)]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + ".")
        count += size
        sentence += 1
        out.append("\n\n" if sentence % 5 == 0 else " ")
    return "".join(out).rstrip() + "\n"


def corpus_words_needed(depths: list[int], pp: int, concurrency: list[int]) -> int:
    """Enough words for the deepest context plus a prompt per concurrent request, three times
    over (llama-benchy cuts slices at random offsets), and at least 20,000."""
    return max(20000, 3 * (max(depths or [0]) + pp * max(concurrency or [1])))
