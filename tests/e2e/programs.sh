# programs.sh: sourced by run_e2e.sh and tests/gpu/run.sh to read programs.txt.
#
#   rg_programs TAG... : the names, in file order, of the entries that have every
#                        TAG; a TAG written !TAG selects those without it.
#   rg_program_src NAME: the path of NAME's source (.cu).
rg_programs_file=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/programs.txt

rg_programs() {
  awk -v want="$*" '
    { sub(/#.*/, "") }
    NF == 0 { next }
    {
      split("", has)
      for (i = 2; i <= NF; i++) has[$i] = 1
      n = split(want, w, " ")
      ok = 1
      for (i = 1; i <= n; i++)
        if (substr(w[i], 1, 1) == "!") { if (substr(w[i], 2) in has) ok = 0 }
        else if (!(w[i] in has)) ok = 0
      if (ok) print $1
    }' "$rg_programs_file"
}

rg_program_src() {
  local d
  d=$(dirname "$rg_programs_file")
  if [[ " $(rg_programs example | tr '\n' ' ') " == *" $1 "* ]]; then
    echo "$(cd "$d/../.." && pwd)/examples/cuda/$1.cu"
  else
    echo "$d/$1.cu"
  fi
}
