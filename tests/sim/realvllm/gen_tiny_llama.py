#!/usr/bin/env python3
# Copyright: lanekit developers
# Apache-2.0
"""Generate the tiny Llama that the real vLLM CPU lane serves (a TEST INSTRUMENT, random weights).

Offline and deterministic: fixed seeds, a corpus built into this file, a byte-level BPE trained
on it. A second run writes byte-identical files (check with sha256sum). The output directory is
complete or absent: files go to a temporary sibling directory that is renamed into place.

    LlamaConfig: hidden 128, intermediate 256, 2 layers, 4 heads, 2 KV heads, head_dim 32,
    vocab 2048, max_position_embeddings 2048, float32; 819,840 parameters, about 3.3 MB.

head_dim is 32 on purpose: vLLM's CPU attention supports 32, 64, 80, 96, 112, 128, 160, 192,
224, 256 and 512, and head_dim=16 boots but kills the engine at the first request.

It needs torch, transformers and tokenizers, so it runs inside the upstream image (the host
needs nothing but docker):

    docker run --rm --name lkreal-gen --network none -v /work/cache:/out \\
        -v "$PWD/tests/sim/realvllm:/src:ro" --entrypoint python3 \\
        lkreal/vllm-cpu-upstream:0.32.0 /src/gen_tiny_llama.py --out /out/tiny-llama
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

# The upstream image ships the CUDA-linked PyPI builds of these (removing them is a patch of the
# thin image); importing transformers pulls torchvision in and fails with "operator
# torchvision::nms does not exist". Hidden from this process only: find_spec() says None and
# `import` raises ImportError, so transformers takes them as not installed.
for _name in ("torchvision", "torchaudio", "torchcodec"):
    sys.modules[_name] = None  # type: ignore[assignment]

SEED = 20261201
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

WORDS = """
the a an and or but if then else when while for to of in on at by with from into over under
lane node rank model token tensor parallel serve engine image patch build test cluster spark
head worker barrier load weight shard cache memory request answer stream chat completion key
health ready start stop boot log line error timeout signal exit code port host address network
docker container registry digest layer tag pin lock plan deploy relay window phase profile
is are was were be been has have had do does did can could will would should may might must
one two three four five six seven eight nine ten hundred thousand first second last next
small large fast slow quiet loud early late simple real fake tiny big old new good bad
hello world please thank you yes no maybe what why how who where which this that these those
""".split()
SYLLABLES = """
ka ri to mu se na lo pe vi da zu ne mo ta ki ru so ha ye bo li fa gu te wi ja co re xa mi
""".split()


def corpus(rng: random.Random) -> list[str]:
    """About 6,000 deterministic lines: English-ish sentences, made-up words, numbers, code-ish text."""
    made_up = sorted({"".join(rng.choice(SYLLABLES) for _n in range(rng.randint(2, 4))) for _n in range(1500)})
    lines = []
    for i in range(6000):
        kind = i % 4
        if kind == 0:
            words = [rng.choice(WORDS) for _n in range(rng.randint(5, 14))]
            lines.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", "."]))
        elif kind == 1:
            lines.append(" ".join(rng.choice(made_up) for _n in range(rng.randint(4, 10))))
        elif kind == 2:
            lines.append(f"rank {rng.randint(0, 7)} of {rng.randint(1, 8)}: {rng.randint(0, 99999)} tokens "
                         f"in {rng.randint(1, 600)}.{rng.randint(0, 99):02d} s")
        else:
            key = rng.choice(WORDS)
            lines.append(f'{{"{key}": {rng.randint(-999, 999)}, "ok": {rng.choice(["true", "false"])}}}')
    return lines


def build_tokenizer(rng: random.Random):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(corpus(rng), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"], chat_template=CHAT_TEMPLATE,
        model_max_length=2048, clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=2048,
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=pad, eos_token_id=eos,
        pad_token_id=pad, initializer_range=0.02,
    )
    config.dtype = torch.float32
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=pad, eos_token_id=[eos, pad], pad_token_id=pad, do_sample=False, max_new_tokens=64,
    )
    return model


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read())
    return digest.hexdigest()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="model directory to create (must not exist, unless --force)")
    parser.add_argument("--force", action="store_true", help="replace an existing directory")
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    if os.path.exists(out) and not args.force:
        print(f"gen_tiny_llama: {out} exists; pass --force to replace it.", file=sys.stderr)
        return 1
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)

    import torch

    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".partial-", dir=parent)
    try:
        tokenizer = build_tokenizer(random.Random(SEED))
        model = build_model(tokenizer)
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        # A quick self-check: the chat template renders and the model runs.
        ids = tokenizer.apply_chat_template([{"role": "user", "content": "hello world"}],
                                            add_generation_prompt=True, return_tensors="pt")
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        with torch.no_grad():
            logits = model(ids).logits
        assert logits.shape[-1] == VOCAB_SIZE, logits.shape
        os.chmod(tmp, 0o755)
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o644)
        if os.path.exists(out):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".old-", dir=parent)
            os.rename(out, os.path.join(old, "model"))
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    params = sum(p.numel() for p in model.parameters())
    print(f"gen_tiny_llama: {out}: {params:,} parameters, tokenizer vocab {len(tokenizer)}")
    for name in sorted(os.listdir(out)):
        print(f"{sha256(os.path.join(out, name))}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
