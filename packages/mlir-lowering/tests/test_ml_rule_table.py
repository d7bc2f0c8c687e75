"""The rule tables load the lax rules at the first lookup, keeping earlier rules.

Each check runs in a fresh interpreter: the test session has long looked
rules up (the deferred modules are loaded).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEFERRED = '''
from lamina_mlir_lowering.rule_table import register_lowering
from lamina_tracing_core.lax import elementwise as ew

def theirs(ctx, x):
    return [x]

register_lowering(ew.sin_p, theirs)   # registered earlier by the script: not replaced
register_lowering(ew.exp_p, theirs, platform="tpu")
'''

SCRIPT = '''
import sys
from lamina_mlir_lowering import rule_table
from lamina_tracing_core.lax import elementwise as ew

def mine(ctx, x):
    return [x]

assert "lamina_mlir_lowering.lax_rules" not in sys.modules
assert "jaxlib.mlir.dialects.stablehlo" not in sys.modules
rule_table.register_lowering(ew.sin_p, mine)            # before the lax rules load
rule_table.register_lowering(ew.cos_p, mine, platform="gpu")
rule_table.defer_rule_module("deferred_rules")
assert "deferred_rules" not in sys.modules
assert rule_table.get_lowering_rule(ew.sin_p, "cpu") is mine  # kept
assert "lamina_mlir_lowering.lax_rules" in sys.modules and "deferred_rules" in sys.modules
assert rule_table.get_lowering_rule(ew.cos_p, "cuda") is mine
assert rule_table.get_lowering_rule(ew.cos_p, "cpu") not in (None, mine)
assert rule_table.get_lowering_rule(ew.tan_p, "cpu") is not None
assert rule_table.get_lowering_rule(ew.exp_p, "tpu") is sys.modules["deferred_rules"].theirs
assert "colorsys" not in sys.modules
rule_table.defer_rule_module("colorsys")  # after the first lookup: imported at once
assert "colorsys" in sys.modules
print("ok")
'''


def test_deferred_rule_modules_load_at_the_first_lookup_and_keep_earlier_rules(
        tmp_path: Path) -> None:
    (tmp_path / "deferred_rules.py").write_text(DEFERRED)
    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
                           + SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


UNTIL = '''
import sys
from lamina_mlir_lowering import rule_table
from lamina_tracing_core.lax import elementwise as ew

def mine(ctx, *args, **params):
    return list(args)

assert rule_table.get_lowering_rule(ew.sin_p, "cpu") is not None  # lax_rules are in
# lax.linalg's rules wait for lax.linalg, which nothing here imported yet
assert "lamina_tracing_core.lax.linalg" not in sys.modules
assert "lamina_mlir_lowering.lax_rules.linalg" not in sys.modules
from lamina_tracing_core.lax import linalg as la   # the primitives exist from here on
rule_table.register_lowering(la.cholesky_p, mine, platform="cpu")  # before their rules load
assert "lamina_mlir_lowering.lax_rules.linalg" not in sys.modules
assert rule_table.get_lowering_rule(la.cholesky_p, "cpu") is mine  # kept
assert "lamina_mlir_lowering.lax_rules.linalg" in sys.modules
assert rule_table.get_lowering_rule(la.cholesky_p, "tpu") is not None  # theirs
assert rule_table.get_lowering_rule(la.qr_p, "cpu") is not None
print("ok")
'''

EVERYTHING = '''
import sys
from lamina_mlir_lowering import rule_table
rule_table.load_deferred_rules()  # what the tables JAX's code reads need: every rule
assert "lamina_mlir_lowering.lax_rules.linalg" in sys.modules
from lamina_tracing_core.lax import linalg as la
assert la.qr_p in rule_table.lowering_rules
assert la.svd_p in rule_table.platform_lowering_rules["cpu"]
print("ok")
'''


def _run(script: str) -> str:
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_linalg_rules_load_once_lax_linalg_is_imported_keeping_earlier_rules() -> None:
    assert _run(UNTIL) == "ok"


def test_load_deferred_rules_loads_the_waiting_rule_modules_too() -> None:
    assert _run(EVERYTHING) == "ok"
