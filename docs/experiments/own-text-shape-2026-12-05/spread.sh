#!/bin/bash
# issue 62: the README's command again once the periodic evaluation reads 40 windows spread over the
# held-out tail instead of its first 40 (which read 0.19 bits/byte easier than the whole tail, so the
# decay and the kept step were chosen on an easy corner). Run from a checkout that has the change.
# Then the two single changes of the day before with the default seed. usage: spread.sh OUT_ROOT
# (with val.txt in it, from trials.sh)
set -u
source "$(dirname "$0")/run.sh"
OUT=$1
run base-spread
run v4096-spread --vocab-size 4096
run d128-spread --set d_model=128 --set d_ff=512
