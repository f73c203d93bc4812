"""robosuite/MuJoCo manipulation: replayed real demonstrations and their physical outcomes.

Offscreen rendering needs EGL with PyOpenGL on EGL too (without the second variable frames are
noise); both are set here, before MuJoCo is imported, unless the caller chose otherwise.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def quiet_robosuite():
    """robosuite, imported with its start-up notices (macro file, optional robots, controller
    configs) kept out of a build's output; its warnings and errors still show."""
    import logging

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        import robosuite
    finally:
        logging.disable(previous)
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)
    return robosuite
