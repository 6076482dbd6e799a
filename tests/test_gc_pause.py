"""The collector is paused inside every section and back as it was after the last one."""

import gc
import threading

import pytest

from benchsite.gc_pause import gc_paused


def test_paused_inside_and_enabled_again_after_the_last_section_even_on_error():
    assert gc.isenabled()
    started, release = threading.Event(), threading.Event()

    def other_request():
        with gc_paused():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=other_request)
    thread.start()
    started.wait(10)
    with pytest.raises(ValueError), gc_paused():
        assert not gc.isenabled()
        raise ValueError("a failed request")
    assert not gc.isenabled()  # the other thread's section is still running
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
