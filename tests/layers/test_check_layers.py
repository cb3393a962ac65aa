"""test_check_layers.py - scripts/check-layers.py's call check on archives built here:
two objects that call each other are a cycle and one-way calls are not; a known cycle
passes only while it stands as listed; a layer that calls a layer its entry does not
name fails to link alone. Run by `make layers` (in `make test`)."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
spec = importlib.util.spec_from_file_location(
    "check_layers", os.path.join(TOP, "scripts", "check-layers.py"))
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)


def build(libs, sources):
    """libccvm-LAYER.a in @libs for every layer, from {layer: {name: C source}}."""
    for name in layers.LAYERS:
        objs = []
        for obj, text in sources.get(name, {}).items():
            src = os.path.join(libs, f"{obj}.c")
            with open(src, "w", encoding="utf-8") as f:
                f.write(text)
            objs.append(os.path.join(libs, f"{obj}.o"))
            subprocess.run(["cc", "-c", "-o", objs[-1], src], check=True)
        archive = layers.archive(libs, name)
        subprocess.run(["ar", "rcs", archive] + objs, check=True)


CYCLE = {"base": {"a": "void b_f(void); void a_f(void) { b_f(); }",
                  "b": "void a_f(void); void b_f(void) { a_f(); }"}}
ONE_WAY = {"base": {"a": "void b_f(void); void a_f(void) { b_f(); }",
                    "b": "void b_f(void) {}"}}
UPWARDS = {"mmu": {"m": "void snap_x(void); void m_f(void) { snap_x(); }"},
           "snapshot": {"s": "void snap_x(void) {}"}}


class CallCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.libs = self.tmp.name
        self.known = layers.KNOWN_CALL_CYCLES
        layers.KNOWN_CALL_CYCLES = ()

    def tearDown(self):
        layers.KNOWN_CALL_CYCLES = self.known
        self.tmp.cleanup()

    def problems(self, sources):
        build(self.libs, sources)
        found = []
        layers.check_calls(self.libs, found)
        layers.check_links(self.libs, found)
        return found

    def test_cycle_fails(self):
        found = self.problems(CYCLE)
        self.assertEqual(len(found), 1)
        self.assertIn("call cycle between objects: base/a -> base/b (b_f)", found[0])

    def test_one_way_passes(self):
        self.assertEqual(self.problems(ONE_WAY), [])

    def test_known_cycle_ratchet(self):
        layers.KNOWN_CALL_CYCLES = (("base/a", "base/b"),)
        self.assertEqual(self.problems(CYCLE), [])
        found = self.problems(ONE_WAY)
        self.assertEqual(len(found), 1)
        self.assertIn("a known call cycle is gone", found[0])

    def test_call_to_undeclared_layer_fails_to_link(self):
        found = self.problems(UPWARDS)
        self.assertEqual(len(found), 1)
        self.assertIn("layer mmu does not link with only base: snap_x", found[0])


if __name__ == "__main__":
    sys.exit(unittest.main())
