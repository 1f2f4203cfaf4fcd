"""`warn_caller`: every warning of the package names the user's line, whatever lies between.

A fixed `stacklevel` names the right line only while the call chain keeps its length: one helper
added (or a test harness's wrapper around a function) and the warning names a line inside the
package. `warn_caller` counts the package's frames instead."""
import inspect
import os
import warnings

import pytest

import finbench.errors as E
from finbench.running import cache as K


def _here() -> int:
    """The line number of the caller's line."""
    return inspect.currentframe().f_back.f_lineno


def test_a_direct_call_names_its_own_line():
    with pytest.warns(UserWarning, match="direct") as caught:
        line = _here(); E.warn_caller("direct", UserWarning)  # noqa: E702 - one line: the line expected
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_frames_inside_the_package_folder_are_passed_over():
    # two wrappers whose code lives in the package's folder (as a mutation tool's trampolines do)
    inner = os.path.join(os.path.dirname(E.__file__), "wrapper_inner.py")
    outer = os.path.join(os.path.dirname(E.__file__), "wrapper_outer.py")
    scope = {"E": E}
    exec(compile("def inner():\n    E.warn_caller('deep', UserWarning)\n", inner, "exec"), scope)
    exec(compile("def outer():\n    inner()\n", outer, "exec"), scope)
    with pytest.warns(UserWarning, match="deep") as caught:
        line = _here(); scope["outer"]()  # noqa: E702
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_a_frame_outside_the_package_stops_the_walk():
    # a user's helper (its code outside the package) between the package and the test: the helper is named
    scope = {"E": E}
    exec(compile("def helper():\n    E.warn_caller('user', UserWarning)\n", "/elsewhere/user_helper.py", "exec"),
         scope)
    with pytest.warns(UserWarning, match="user") as caught:
        scope["helper"]()
    assert (caught[0].filename, caught[0].lineno) == ("/elsewhere/user_helper.py", 2)


def test_a_folder_named_like_the_package_is_outside_it():
    # the package's folder name followed by more letters is another folder, not the package
    sibling = os.path.dirname(E.__file__) + "_extra" + os.sep + "mod.py"
    scope = {"E": E}
    exec(compile("def f():\n    E.warn_caller('sibling', UserWarning)\n", sibling, "exec"), scope)
    with pytest.warns(UserWarning, match="sibling") as caught:
        scope["f"]()
    assert (caught[0].filename, caught[0].lineno) == (sibling, 2)


def test_a_package_warning_names_the_test_line(tmp_path):
    # a real door: an unusable episode cache folder, warned from two calls deep in finbench.running.cache
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _here(); got = K.usable(blocker)  # noqa: E702
    assert got is None
    mine = [w for w in caught if issubclass(w.category, K.CacheWarning)]
    assert len(mine) == 1 and (mine[0].filename, mine[0].lineno) == (__file__, line)


def test_an_installed_library_s_frames_between_are_passed_over():
    # a tool's wrapper installed in site-packages (as mutmut's trampoline is) between the package's frames
    import sysconfig
    lib = os.path.join(sysconfig.get_paths()["purelib"], "some_tool", "trampoline.py")
    inner = os.path.join(os.path.dirname(E.__file__), "wrapper_inner.py")
    scope = {"E": E}
    exec(compile("def inner():\n    E.warn_caller('wrapped', UserWarning)\n", inner, "exec"), scope)
    exec(compile("def tramp():\n    inner()\n", lib, "exec"), scope)
    with pytest.warns(UserWarning, match="wrapped") as caught:
        line = _here(); scope["tramp"]()  # noqa: E702
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_with_no_user_frame_the_first_frame_outside_the_package_is_named():
    import sysconfig
    lib = os.path.join(sysconfig.get_paths()["purelib"], "some_tool", "runner.py")
    scope = {"E": E}
    # the whole stack above is library code when run from a thread whose target is installed code
    exec(compile("def run(out):\n    import warnings\n    with warnings.catch_warnings(record=True) as w:\n"
                 "        warnings.simplefilter('always')\n        E.warn_caller('lib', UserWarning)\n"
                 "    out.extend(w)\n", lib, "exec"), scope)
    import threading
    out: list = []
    thread = threading.Thread(target=scope["run"], args=(out,))
    thread.start()
    thread.join()
    assert len(out) == 1 and (out[0].filename, out[0].lineno) == (lib, 5)
