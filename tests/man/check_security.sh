#!/usr/bin/env bash
# Checks the SECURITY sections of ddlrun(1) and libddl(3) against the program and the code, so
# that they cannot rot silently when an option or a variable is renamed:
#   1. each page has a SECURITY section (rendered text, as .SH renders it);
#   2. ddlrun(1)'s section names the knob of every listener and of the token (the list below),
#      and libddl(3)'s names the token's variable;
#   3. every long option the sections name is one that `ddlrun --help` lists (but the few that
#      belong to other launchers, listed below);
#   4. every DDL_*, PET_* or MASTER_* variable the sections name is read or set somewhere in
#      the sources (as a quoted name);
#   5. the messages the section quotes are still the code's.
# Rendering without warnings is check_man.sh's job (man.renders, man.libddl_renders).
# Usage: tests/man/check_security.sh DDLRUN SOURCE_DIR
set -u -o pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 DDLRUN SOURCE_DIR" >&2
  exit 2
fi
ddlrun=$1
src=$2
for tool in groff col grep; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check_security: '$tool' is not installed" >&2
    exit 2
  fi
done

status=0
fail() {
  echo "check_security: $*" >&2
  status=1
}

# The rendered text of section SECURITY of page $1 (up to the next section heading).
security_of() {
  LC_ALL=C.UTF-8 groff -man -Tutf8 -rLL=80n -P -c "$1" 2>/dev/null | col -bx |
    awk '/^SECURITY$/ { on = 1; next } on && /^[A-Z][A-Z ]*$/ { exit } on { print }'
}

ddlrun_text=$(security_of "$src/man/ddlrun.1")
libddl_text=$(security_of "$src/man/libddl.3")
[[ -n $ddlrun_text ]] || fail "man/ddlrun.1 has no SECURITY section"
[[ -n $libddl_text ]] || fail "man/libddl.3 has no SECURITY section"
# Words as the page renders them: hyphenation is off, but a word may still end a line.
ddlrun_words=$(tr -s ' \t\n' '\n' <<<"$ddlrun_text")
libddl_words=$(tr -s ' \t\n' '\n' <<<"$libddl_text")

# 2. What each listener and the token are set with: the section must name each.
required=(--nic --no-probe --rdzv --master-port --probe-links-port --rdzv-token-file
          DDL_JOB_TOKEN DDL_RENDEZVOUS MASTER_PORT PET_RDZV_ENDPOINT PET_MASTER_PORT
          PMIX_SERVER_URI PMIX_SECURITY_MODE)
for name in "${required[@]}"; do
  grep -q -e "$name" <<<"$ddlrun_words" || fail "man/ddlrun.1 SECURITY does not name $name"
done
grep -q DDL_JOB_TOKEN <<<"$libddl_words" || fail "man/libddl.3 SECURITY does not name DDL_JOB_TOKEN"

# 3. Long options named must be ddlrun's, but those of the launchers ddlrun runs.
foreign=(--export)  # srun's: the token forwarded by name
if ! help=$("$ddlrun" --help 2>&1); then
  fail "'$ddlrun --help' failed"
fi
options=$(grep -o -E -e '--[a-z][a-z-]*[a-z]' <<<"$ddlrun_text$libddl_text" | sort -u)
[[ -n $options ]] || fail "the SECURITY sections name no option"
for o in $options; do
  [[ " ${foreign[*]} " == *" $o "* ]] && continue
  grep -q -E -e "(^|[ ,])$o([ ,=]|\$)" <<<"$help" ||
    fail "SECURITY names $o, which 'ddlrun --help' does not list"
done

# 4. Variables named must be ones the sources use.
variables=$(grep -o -E '\b(DDL|PET|MASTER)_[A-Z_]*[A-Z]\b' <<<"$ddlrun_text$libddl_text" | sort -u)
for v in $variables; do
  grep -r -q -F --include='*.cc' --include='*.h' --include='*.py' -e "\"$v" \
    "$src/ddlrun" "$src/launcher" "$src/comm" "$src/python" ||
    fail "SECURITY names \$$v, which no source under ddlrun/ launcher/ comm/ python/ uses"
done

# 5. Quoted messages: a distinctive piece of each must still be in the code.
messages=("ddlrun/per_node/node_job.cc|is unauthenticated: anyone who reaches it can join this job"
          "launcher/ssh/relay.cc|which is not below ")
for m in "${messages[@]}"; do
  file=${m%%|*}
  text=${m#*|}
  grep -q -F -e "$text" "$src/$file" || fail "$file no longer says '$text' (quoted in SECURITY)"
  grep -q -F -e "$text" <<<"$(tr -s ' \n' ' ' <<<"$ddlrun_text")" ||
    fail "man/ddlrun.1 SECURITY no longer quotes '$text'"
done

if [[ $status -eq 0 ]]; then
  echo "check_security: OK ($(wc -w <<<"$options") options, $(wc -w <<<"$variables") variables)"
fi
exit $status
