"""The bench: settings, the corpus, runs on a host, reports, gates and charts."""
