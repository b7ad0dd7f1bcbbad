#!/usr/bin/env bash
# Checks a man page: it must render without warnings from man-db and groff, and its rendered
# text must hold the given sections (by default those of a section-1 page).
# Usage: tests/man/check_man.sh man/ddlrun.1 [SECTION...]
set -u -o pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 MANPAGE [SECTION...]" >&2
  exit 2
fi
page=$1
shift
sections=("$@")
if ((${#sections[@]} == 0)); then
  sections=(NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT EXAMPLES)
fi
if [[ ! -r $page ]]; then
  echo "check_man: cannot read '$page'" >&2
  exit 2
fi
for tool in man groff col; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check_man: '$tool' is not installed; cannot check $page" >&2
    exit 2
  fi
done

status=0
fail() {
  echo "check_man: $page: $*" >&2
  status=1
}

# 1. man-db's own warnings (it runs groff with -ww and reports what it prints).
warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
if [[ -n $warnings ]]; then
  fail "man --warnings printed:"
  printf '%s\n' "$warnings" >&2
fi

# 2. groff with every warning enabled, no output.
warnings=$(groff -man -ww -z "$page" 2>&1)
if [[ -n $warnings ]]; then
  fail "groff -man -ww -z printed:"
  printf '%s\n' "$warnings" >&2
fi

# 3. The rendered plain text must hold each required section heading, alone on its line at the
#    left margin (as .SH renders it).
if ! text=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -rLL=80n -P -c "$page" 2>/dev/null | col -b); then
  fail "groff could not render the page"
  text=""
fi
if [[ -z $text ]]; then
  fail "rendered text is empty"
fi
for section in "${sections[@]}"; do
  if ! grep -qx -- "$section" <<<"$text"; then
    fail "section '$section' is missing from the rendered text"
  fi
done

if [[ $status -eq 0 ]]; then
  echo "check_man: $page: OK"
fi
exit $status
