"""robosuite/MuJoCo manipulation: replayed real demonstrations and their physical outcomes.

Offscreen rendering needs EGL with PyOpenGL on EGL too (without the second variable frames are
noise); both are set here, before MuJoCo is imported, unless the caller chose otherwise.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
