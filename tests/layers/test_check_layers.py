"""test_check_layers.py - scripts/check-layers.py's call check on archives built here:
two objects that call each other are a cycle and one-way calls are not; a known cycle
passes only while it stands as listed; a handler outside a sys_*.c file is named; a
layer that calls a layer its entry does not name fails to link alone. And the list of
system calls generated from vmm/linux/systab.h. Run by `make layers` (in `make test`)."""
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
STRAY_HANDLER = {"linux": {"timer": "long sys_alarm(void) { return 0; }",
                           "sys_misc": "long sys_uname(void) { return 0; }"}}
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

    def test_handler_outside_sys_file_fails(self):
        found = []
        build(self.libs, STRAY_HANDLER)
        layers.check_handlers(self.libs, found)
        self.assertEqual(len(found), 1)
        self.assertIn("vmm/linux/timer.c defines system-call handlers outside a sys_*.c "
                      "file: sys_alarm", found[0])

    def test_call_to_undeclared_layer_fails_to_link(self):
        found = self.problems(UPWARDS)
        self.assertEqual(len(found), 1)
        self.assertIn("layer mmu does not link with only base: snap_x", found[0])


class SyscallList(unittest.TestCase):
    """docs/compatibility.md's list is the table's: every entry a row, its note
    joined from the C string pieces, a malformed entry named."""

    TABLE = ('#define LX_SYSCALLS(X) \\\n'
             '\tX(read, LX_FULL, "") \\\n'
             '\tX(ioctl, LX_PARTIAL, "TCGETS; " \\\n\t\t\t"others ENOTTY") \\\n'
             '\tX(write, LX_FULL, "") \\\n')

    def listing(self, table):
        real = layers.read
        layers.read = lambda path: table if path == layers.SYSTAB else real(path)
        try:
            found = []
            return layers.syscall_listing(found), found
        finally:
            layers.read = real

    def test_rows_from_the_table(self):
        text, found = self.listing(self.TABLE)
        self.assertEqual(found, [])
        self.assertIn("| `read` | yes |  |", text)
        self.assertIn("| `ioctl` | partly | TCGETS; others ENOTTY |", text)
        self.assertIn("3 calls; 2 as on Linux", text)

    def test_malformed_entry_named(self):
        _, found = self.listing(self.TABLE + '\tX(bad, LX_MAYBE, "") \\\n')
        self.assertEqual(len(found), 1)
        self.assertIn("an entry is not X(name", found[0])


if __name__ == "__main__":
    sys.exit(unittest.main())
