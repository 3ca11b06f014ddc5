"""What the TensorBoard tests share: check(cond, what) records and prints a failed expectation
without stopping, so that one run reports every failure; finish(summary) then exits 1 when any
failed, else prints the one-line summary."""
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def finish(summary):
    if failures:
        sys.exit(1)
    print(summary)
