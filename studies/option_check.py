"""Provider options on every available EP (issue 12): what ORT lists, what pytest-aaco refuses, what it hides.

For each EP of this ONNX Runtime build (or ``--provider``), on the model zoo's squeezenet:

1. a session with no options: how many option keys ``get_provider_options()`` lists, and whether
   that list goes beyond the request (then pytest-aaco trusts it as the EP's full list);
2. ``device_id`` (GPU EPs) or nothing (CPU): must build;
3. an unknown key ``bogus_option``: must be refused by :func:`pytest_aaco.measure.inference.build_session`
   (or, on the CPU EP, by :func:`pytest_aaco.measure.providers.check_options`), naming the key;
4. an unknown key with a credential-like name and value (``bogus_token=<value>``): the error must
   not contain the value.

Prints one line per check and exits 1 when a check fails. No timing: no lock needed.

    python studies/option_check.py                 # every EP this build offers
    python studies/option_check.py --provider cuda # one EP
"""

from __future__ import annotations

import argparse
import sys

from pytest_aaco.measure.inference import SessionError, build_session
from pytest_aaco.measure.providers import ProviderError, available_providers, check_options, parse_provider
from pytest_aaco.measure.registry import zoo_model_path

SECRET = "s3cr3t-v4lue-never-shown"


def check(short: str, required: bool = True) -> list[str]:
    """The failed checks of EP *short* (``[]`` when all pass); prints what it sees. An EP on which
    no session can be built is a failure when *required* (named with ``--provider``), else skipped."""
    spec = parse_provider(short)
    model = zoo_model_path("squeezenet")
    failures: list[str] = []
    table = spec.ep.option_keys
    if table is not None:  # a documented table: checked when the options are read
        for key in ("bogus_option", "bogus_token"):
            try:
                check_options([spec], [key])
                failures.append(f"{spec.ep_name}: {key} was not refused by the table")
            except ProviderError as exc:
                print(f"{spec.ep_name}: table refuses {key}: {exc}")
        return failures
    try:
        handle = build_session(model, spec)
    except SessionError as exc:  # listed by the build, unusable here (TensorRT without its libraries)
        print(f"{spec.ep_name}: SKIPPED, no session can be built on this machine: {exc}")
        return [f"{spec.ep_name}: no session: {exc}"] if required else []
    reported = handle.session.get_provider_options().get(spec.ep_name) or {}
    full = bool(set(reported) - set(handle.options))
    print(f"{spec.ep_name}: lists {len(reported)} option keys; beyond the request: {full}")
    for options, must_fail in (({"bogus_option": "1"}, True), ({"bogus_token": SECRET}, True)):
        try:
            build_session(model, spec.with_options(options))
            outcome = "built"
        except SessionError as exc:
            outcome = f"refused: {exc}"
            if SECRET in str(exc):
                failures.append(f"{spec.ep_name}: the error shows the secret value: {exc}")
        print(f"{spec.ep_name} {options}: {outcome.replace(SECRET, '<secret>')}")
        if must_fail and outcome == "built" and full:
            failures.append(f"{spec.ep_name}: {sorted(options)} was not refused although the EP lists its options")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", action="append", help="EP short name (repeatable; default: every available)")
    args = parser.parse_args()
    shorts = args.provider or [parse_provider(ep).short for ep in available_providers()
                               if ep.lower().replace("executionprovider", "") in
                               ("cpu", "cuda", "tensorrt", "migraphx", "rocm", "openvino", "dml")]
    failures = [f for short in shorts for f in check(short, required=bool(args.provider))]
    for failure in failures:
        print(f"FAILED: {failure}")
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
