# Shared by the end-to-end test scripts (sourced): `check <description> <command...>` runs the command, prints
# "ok   <description>" or "FAIL <description>" and remembers a failure in $fail; scripts end with `exit $fail`.
fail=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
