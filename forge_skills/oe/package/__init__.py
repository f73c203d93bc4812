"""The OE release: the package skill (items, answer key, media, scorer, composition) and the media
rebuild a package ships."""
