"""The lane's ledger: one record per deploy, failure, restart, teardown and bench, its table, timelines and the watch."""
