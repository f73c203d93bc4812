"""S5 package: the release, and the files shipped in it (scorer, media drawing, rebuild)."""
