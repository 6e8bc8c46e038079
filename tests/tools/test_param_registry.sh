#!/usr/bin/env bash
# The parameter registry (core/src/misc/params.cc) holds every knob the sources read: each name read through
# envGet / envInt / envStr, and each NCCL_* / PLEXUS_* variable read straight with getenv outside the tests, must
# have a line in `plexus-info --params` (as NCCL_<name> or PLEXUS_<name>). Fails naming the missing ones.
#   test_param_registry.sh <plexus-info> <source dir>
set -euo pipefail
info=$1
src=$2
fail() { echo "test_param_registry: $*" >&2; exit 1; }

out=$("$info" --params 2>&1) || { echo "$out" >&2; fail "plexus-info --params failed"; }
listed=$(grep -oE '^  (NCCL|PLEXUS)_[A-Z0-9_]+ ' <<<"$out" | sed -E 's/^  (NCCL|PLEXUS)_//; s/ $//' | sort -u)
# Knobs listed under NCCL's own name keep Plexus's ("...; also PLEXUS_P2P_READ").
listed+=$'\n'$(grep -oE 'also PLEXUS_[A-Z0-9_]+' <<<"$out" | sed 's/also PLEXUS_//' || true)
[ "$(wc -l <<<"$listed")" -ge 30 ] || { echo "$out" >&2; fail "plexus-info --params lists fewer than 30 knobs"; }

dirs=()
for d in core plugins plugin-api tools integrations; do [ -d "$src/$d" ] && dirs+=("$src/$d"); done
[ ${#dirs[@]} -gt 0 ] || fail "$src has none of core, plugins, plugin-api, tools, integrations: wrong source dir?"
read_names=$(grep -rhoE --include='*.cc' --include='*.h' 'env(Int|Str|Get)\("[A-Z0-9_]+"' "${dirs[@]}" |
               sed -E 's/^[^"]*"//; s/"$//' | sort -u)
[ "$(wc -l <<<"$read_names")" -ge 30 ] || fail "found fewer than 30 names read through envGet/envInt/envStr in $src"
getenv_names=$(grep -rhoE --include='*.cc' --include='*.h' --exclude-dir=tests --exclude-dir=test \
                 'getenv\("(NCCL|PLEXUS)_[A-Z0-9_]+"' "${dirs[@]}" | sed -E 's/^[^"]*"(NCCL|PLEXUS)_//; s/"$//' |
               sort -u)

missing=()
for n in $read_names $getenv_names; do
  grep -qxF "$n" <<<"$listed" || missing+=("$n")
done
if [ ${#missing[@]} -gt 0 ]; then
  fail "missing from the parameter registry (core/src/misc/params.cc), though the sources read them:" \
       "$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')- add each with its type, default, description" \
       "and whether README.md documents it"
fi
echo "test_param_registry: all $(printf '%s\n' $read_names $getenv_names | sort -u | wc -l) knobs the sources read" \
     "are in plexus-info --params ($(wc -l <<<"$listed") names)"
