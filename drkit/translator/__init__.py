"""The checkpoint translator: committed source offsets -> exact target offsets, into Delta."""
