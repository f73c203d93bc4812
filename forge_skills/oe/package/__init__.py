"""The OE release: the package skill and the media rebuild a package ships."""
