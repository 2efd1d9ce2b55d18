#!/bin/bash
# issue 62: how far apart two seeds of one command land (the noise the trials' differences stand
# against): the preset and its 4 x 128 variant again with --seed 2 and the same held-out tail
# (--split-seed 1337); trials.sh and own-text-shape-2026-12-04 used the default seed.
# usage: seeds.sh OUT_ROOT (after trials.sh)
set -u
source "$(dirname "$0")/run.sh"
OUT=$1
run base-seed2 --seed 2 --split-seed 1337
run d128-seed2 --set d_model=128 --set d_ff=512 --seed 2 --split-seed 1337
