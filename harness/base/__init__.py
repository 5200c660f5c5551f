"""Files and text: the one bounded reader, the one writer, exact JSON, escaping, the error tree."""
