"""Where Dagster runs execute on this machine: the warm run worker and the run launcher that
hands it runs (`run_worker`, `launcher`), the instance's configuration (`instance`), `./tj dev`
(`dev`: the UI, the worker, a warm Spark), the warm-up run on a tiny sample (`warm_up`) and a
webserver harness for tests and the live demo (`dagster_server`). The code location
(`pipelines`) does not depend on it."""
