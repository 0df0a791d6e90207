"""Exceptions raised by the data loaders.

Every message says what to install or which path to give, so a user who hits one knows the
next step without reading the source.
"""


class DataError(Exception):
    """Root of the data-loading errors."""


class DataNotFoundError(DataError, FileNotFoundError):
    """A dataset (or the package that ships it) is not where the loader looked."""


class DataFormatError(DataError, ValueError):
    """A file was found but its content is not what the format promises."""


class UnsafePickleError(DataFormatError):
    """A pickle asked for something other than plain numpy arrays."""
