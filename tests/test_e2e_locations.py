"""Issue 19 end to end: op locations carry the user's column range and, with
``include_full_tracebacks_in_locations`` (also ``jax_``-named), the call-site
chain of user frames, with lamina's and jaxlib's frames left out, as JAX 0.10
prints them: ``loc("jit(f)/sin"(callsite("g"("u.py":3:11 to :21) at ...)))``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import config
from lamina_tracing_core import source_info


@pytest.fixture
def full_tracebacks() -> Iterator[None]:
    before = config.read("include_full_tracebacks_in_locations")
    config.update("jax_include_full_tracebacks_in_locations", True)
    try:
        yield
    finally:
        config.update("include_full_tracebacks_in_locations", before)


def _line(marker: str) -> tuple[int, str]:
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return number, text
    raise AssertionError(marker)


def _g(x):
    return jnp.sin(x) * 2.0  # g-line


def _f(x):
    y = _g(x)  # f-line
    return y + 1.0


def _lowered_text(fun, n: int) -> str:
    return lx.jit(fun).lower(np.ones(n, np.float32)).as_text(debug_info=True)


def _aliases(text: str) -> dict[str, str]:
    return dict(re.findall(r"^(#loc\d*) = (loc\(.*\))$", text, re.M))


def _expand(loc: str, aliases: dict[str, str]) -> str:
    while (alias := re.search(r"#loc\d*", loc)) is not None:
        loc = loc.replace(alias.group(0), aliases[alias.group(0)][4:-1], 1)
    return loc


def _op_loc(text: str, op: str) -> str:
    """The location of the first ``op`` in the module, aliases expanded."""
    aliases = _aliases(text)
    match = re.search(rf"stablehlo\.{op} .* loc\((#loc\d*)\)$", text, re.M)
    assert match, text
    return _expand(aliases[match.group(1)], aliases)


def _all_locs(text: str) -> str:
    aliases = _aliases(text)
    return "\n".join(_expand(loc, aliases) for loc in aliases.values())


def test_switch_is_off_by_default_and_reads_under_both_names() -> None:
    assert config.read("include_full_tracebacks_in_locations") is False
    assert config.read("jax_include_full_tracebacks_in_locations") is False
    assert "include_full_tracebacks_in_locations" in config.config.names()


def test_op_location_has_the_start_column_of_the_user_expression() -> None:
    line, text = _line("g-line")
    loc = _op_loc(_lowered_text(_f, 3), "sine")
    assert loc == f'loc(fused["{__file__}":{line}:{text.index("jnp.sin")}, "jit(_f)/sin"])'
    assert "callsite" not in _lowered_text(_f, 3)


def test_full_tracebacks_give_a_call_site_chain_of_user_frames(full_tracebacks) -> None:
    g_line, g_text = _line("g-line")
    f_line, f_text = _line("f-line")
    text = _lowered_text(_f, 5)
    loc = _op_loc(text, "sine")
    g_start, f_start = g_text.index("jnp.sin"), f_text.index("_g(x)")
    assert loc.startswith(
        f'loc("jit(_f)/sin"(callsite("_g"("{__file__}":{g_line}:{g_start} to '
        f':{g_start + len("jnp.sin(x)")}) at callsite("_f"("{__file__}":{f_line}:{f_start} '
        f'to :{f_start + len("_g(x)")}) at '), loc
    mul = _op_loc(text, "multiply")
    assert f'"_g"("{__file__}":{g_line}:{g_start} to :{g_start + len("jnp.sin(x) * 2.0")})' in mul
    # lamina's and jaxlib's own frames are not in any location
    files = set(re.findall(r'"([^"]+)":\d+:\d+', text))
    assert __file__ in files
    for name in files:
        assert "lamina_" not in name and "/jaxlib/" not in name, name


def test_same_line_called_from_two_places_gets_two_chains(full_tracebacks) -> None:
    def h(x):
        return _g(x) + _g(x)  # h-line

    line, text = _line("h-line")
    first, second = text.index("_g(x)"), text.rindex("_g(x)")
    module = _all_locs(_lowered_text(h, 6))
    assert f'"h"("{__file__}":{line}:{first} to :{first + 5})' in module
    assert f'"h"("{__file__}":{line}:{second} to :{second + 5})' in module


def test_switching_off_again_drops_the_chain(full_tracebacks) -> None:
    config.update("include_full_tracebacks_in_locations", False)
    text = _lowered_text(_f, 7)
    assert "callsite" not in text and " to :" not in text
    assert source_info.include_full_tracebacks_in_locations() is False


@pytest.mark.parametrize("full", [False, True])
def test_argument_names_and_locations_are_unchanged(full: bool) -> None:
    before = config.read("include_full_tracebacks_in_locations")
    config.update("include_full_tracebacks_in_locations", full)
    try:
        text = lx.jit(lambda x, y: x * y).lower(
            np.ones(8 + full, np.float32), np.ones(8 + full, np.float32)).as_text(debug_info=True)
    finally:
        config.update("include_full_tracebacks_in_locations", before)
    assert re.search(r'%arg0: tensor<\d+xf32> \{jax\.arg_info = "x"\} loc\("x"\)', text), text
    assert re.search(r'%arg1: tensor<\d+xf32> \{jax\.arg_info = "y"\} loc\("y"\)', text), text


def test_flipping_the_switch_retraces_instead_of_reusing_a_lowering() -> None:
    """The switch is part of the tracing-cache key: one jitted function lowered
    for one shape with the switch off, on and off again gets each setting's
    locations (a jaxpr traced with it off has no callers to chain)."""
    jitted = lx.jit(_f)
    x = np.ones(11, np.float32)
    before = config.read("include_full_tracebacks_in_locations")
    try:
        off = jitted.lower(x).as_text(debug_info=True)
        config.update("include_full_tracebacks_in_locations", True)
        on = jitted.lower(x).as_text(debug_info=True)
        config.update("include_full_tracebacks_in_locations", False)
        off_again = jitted.lower(x).as_text(debug_info=True)
    finally:
        config.update("include_full_tracebacks_in_locations", before)
    assert "callsite" not in off and "callsite" not in off_again
    assert 'at callsite("_f"(' in _op_loc(on, "sine"), on
    assert off_again == off
