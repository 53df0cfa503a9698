"""The one exception type of the data package.

Every problem with the user's data or data settings raises DataError, with a message that names the file or
the config field and says what is allowed, so a run fails at start-up with something the user can act on.
"""

from tinygpt.common.errors import ConfigError


class DataError(ConfigError):
    """Bad corpus, bad data settings, or a file that is missing and cannot be fetched."""
