"""LIBERO task definitions (BDDL) read into plain data and matched against robosuite's assets."""
