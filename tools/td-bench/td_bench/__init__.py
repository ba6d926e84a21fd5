# SPDX-License-Identifier: BSD-3-Clause
"""td_bench - the modules of td-bench, tapstripe's throughput regression.

  core.py     finding programs, the machine and its load, units, statistics,
              the progress line, the results of one run
  targets.py  the things measured: a backing file, a tapdisk serving it,
              qemu-nbd, and one run of dd, fio or td-front against them
  sweep.py    the dd-style block-size and data-size sweeps
  mix.py      the workload mix (loss table)
  scripts.py  ring, sort, stripe, peers: the experiments of bench/*.sh
  quick.py    the quick probe set that regress --quick runs in CI
  regress.py  baselines, tolerances and the verdict
  plot.py     gnuplot pictures (SVG and PNG)
  cli.py      the command line
"""
