"""The demo: sample data (orders, rates, deliveries, customers, accounts) landed in waves and
taken through every demo pipeline (`python -m demo`, i.e. `./tj demo`: `demo.run`), and the live
demo behind `./tj dev` (`demo.live_demo`). It uses the code location (`pipelines`) and the run
platform (`runplatform`); nothing else imports it."""
