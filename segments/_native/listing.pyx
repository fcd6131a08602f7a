# cython: language_level=3
"""A log directory's listing in one compiled pass: :func:`list_directory` reads a directory with ``readdir`` and
returns its regular files, its links and the file names grouped by final suffix, so a log load looks up the kind
of file each of its steps wants (``.log``, ``.snapshot``, the transient suffixes) instead of making an
``os.DirEntry`` per name and testing every name with ``str.endswith`` in the interpreter (a clean load of a
partition of 10 segments lists about 40 names: a quarter of the load went to its listing). :func:`canonical_offsets`
parses the offsets of names as Kafka writes them (20 digits and a suffix) in bulk."""

from libc.errno cimport ENOENT, errno
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, strlen
from posix.stat cimport S_ISLNK, S_ISREG, struct_stat

from segments._native.fileio cimport encoded_path


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_Tailmatch(object text, object suffix, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    bint PyUnicode_IS_ASCII(object text)
    const char *PyUnicode_DATA(object text)
    object PyUnicode_DecodeFSDefaultAndSize(const char *text, Py_ssize_t size)
    bytes PyUnicode_EncodeFSDefault(object text)
    object PyErr_SetFromErrnoWithFilenameObject(object kind, object filename)

cdef extern from "<dirent.h>" nogil:
    ctypedef struct DIR:
        pass
    struct dirent:
        unsigned char d_type
        char d_name[256]
    DIR *opendir(const char *name)
    int closedir(DIR *directory)
    int dirfd(DIR *directory)
    enum:
        DT_UNKNOWN
        DT_REG
        DT_LNK

cdef extern from "<fcntl.h>" nogil:
    enum: AT_SYMLINK_NOFOLLOW

cdef extern from *:
    """
    #include <errno.h>
    #include <dirent.h>
    /* readdir's next entry, errno cleared first: NULL with errno 0 is the end, with an errno a failed read. */
    static inline struct dirent *logmgr_next_entry(DIR *directory) {
        errno = 0;
        return readdir(directory);
    }
    """
    dirent *next_entry "logmgr_next_entry"(DIR *directory) nogil

cdef extern from "<sys/stat.h>" nogil:
    int fstatat(int directory_fd, const char *name, struct_stat *found, int flags)

# The digits of an offset in a file name as Kafka writes it (LogFileUtils.filenamePrefixFromOffset).
cdef Py_ssize_t _OFFSET_DIGITS = 20
cdef uint64_t _INT64_MAX = 9223372036854775807


cdef list _checked_suffixes(tuple suffixes):
    """``suffixes`` as file-system bytes, after checking each is an ASCII ``str`` with one dot, its first
    character: the text from a name's last dot is then one of them exactly when its bytes are. O(len)."""
    cdef list encoded = []
    cdef object suffix
    for suffix in suffixes:
        if (not isinstance(suffix, str) or not (<str>suffix).isascii() or (<str>suffix).find(".") != 0
                or (<str>suffix).find(".", 1) != -1):
            raise ValueError(f"a suffix must be an ASCII str with one dot, its first character: {suffix!r}")
        encoded.append(PyUnicode_EncodeFSDefault(suffix))
    return encoded


cdef int _kind(int directory_fd, dirent *entry, bint *is_link, bint *is_file) except -1:
    """Whether ``entry`` is a link and whether it is a regular file (a link: whether it leads to one, as
    ``os.DirEntry.is_file()`` answers), from its type when the file system gives one, else from ``fstatat``. An
    entry removed meanwhile is neither (as ``os.scandir`` has it). O(1), a stat for a link."""
    cdef struct_stat found
    cdef unsigned char kind = entry.d_type
    is_link[0] = kind == DT_LNK
    is_file[0] = kind == DT_REG
    if kind == DT_UNKNOWN:
        if fstatat(directory_fd, entry.d_name, &found, AT_SYMLINK_NOFOLLOW) != 0:
            if errno == ENOENT:
                return 0
            return -1
        is_link[0] = S_ISLNK(found.st_mode)
        is_file[0] = S_ISREG(found.st_mode)
    if is_link[0]:
        if fstatat(directory_fd, entry.d_name, &found, 0) != 0:
            # A dangling link (or a loop): not a file, as is_file() answers.
            return 0
        is_file[0] = S_ISREG(found.st_mode)
    return 0


def list_directory(path, tuple suffixes):
    """One read of the directory at ``path`` (a ``str`` or path object; a link to a directory is followed, as
    ``os.scandir`` does): ``(files, links, by_suffix)``, where ``files`` is the set of names of its regular files
    (links to one included, as ``os.DirEntry.is_file()`` counts them), ``links`` the names of its symbolic links
    (to anything), and ``by_suffix`` maps each of ``suffixes`` (each an ASCII ``str`` with one dot, its first
    character) to the names of ``files`` whose text from the last dot is that suffix (what ``str.endswith`` of a
    one-dot suffix tests), in listing order. Names are decoded as ``os.listdir`` decodes them. Raises ``OSError``
    naming ``path`` (``FileNotFoundError``, ``NotADirectoryError`` ...). O(entries * len(suffixes)), a stat per
    link (and per entry on a file system that gives no types)."""
    cdef list encoded = _checked_suffixes(suffixes)
    cdef Py_ssize_t count = len(encoded), i, length, dot
    cdef dict by_suffix = {key: [] for key in suffixes}
    cdef list groups = [by_suffix[key] for key in suffixes]
    cdef set files = set()
    cdef set links = set()
    cdef bytes raw_path = encoded_path(path)
    cdef DIR *directory
    cdef dirent *entry
    cdef const char *name
    cdef const char *wanted
    cdef const char *c_path = raw_path
    cdef bint is_link, is_file
    cdef object text
    with nogil:
        directory = opendir(c_path)
    if directory == NULL:
        PyErr_SetFromErrnoWithFilenameObject(OSError, path)
    try:
        while True:
            entry = next_entry(directory)
            if entry == NULL:
                if errno != 0:
                    PyErr_SetFromErrnoWithFilenameObject(OSError, path)
                break
            name = entry.d_name
            length = strlen(name)
            if name[0] == b"." and (length == 1 or (length == 2 and name[1] == b".")):
                continue
            if _kind(dirfd(directory), entry, &is_link, &is_file) != 0:
                PyErr_SetFromErrnoWithFilenameObject(OSError, path)
            if not (is_link or is_file):
                continue
            text = PyUnicode_DecodeFSDefaultAndSize(name, length)
            if is_link:
                links.add(text)
            if not is_file:
                continue
            files.add(text)
            dot = length - 1
            while dot >= 0 and name[dot] != b".":
                dot -= 1
            if dot < 0:
                continue
            for i in range(count):
                wanted = <bytes>encoded[i]
                # The length first: one suffix of the few has it, and only that one is compared.
                if len(<bytes>encoded[i]) == length - dot and memcmp(name + dot, wanted, length - dot) == 0:
                    (<list>groups[i]).append(text)
                    break
    finally:
        closedir(directory)
    return files, frozenset(links), by_suffix


def canonical_offsets(list names, str suffix):
    """The offsets of ``names`` when every one is named as Kafka writes it (20 ASCII digits, then ``suffix``: what
    ``segments.naming.offset_from_file_name`` gives each), in order; None when any is not (the caller then parses
    them one by one). A log load's bulk parse of its listing. O(total length)."""
    cdef list offsets = []
    cdef object name
    cdef Py_ssize_t suffix_length = len(suffix), j
    cdef const char *digits
    cdef uint64_t value
    cdef unsigned char digit
    for name in names:
        if (not isinstance(name, str) or len(<str>name) != _OFFSET_DIGITS + suffix_length
                or not PyUnicode_IS_ASCII(name)
                or not PyUnicode_Tailmatch(name, suffix, _OFFSET_DIGITS, _OFFSET_DIGITS + suffix_length, 1)):
            return None
        digits = PyUnicode_DATA(name)
        value = 0
        for j in range(_OFFSET_DIGITS):
            digit = <unsigned char>digits[j] - 48
            if digit > 9:
                return None
            # Nineteen digits fit 64 unsigned bits; the twentieth is checked against the signed maximum first.
            if j == _OFFSET_DIGITS - 1 and value > (_INT64_MAX - digit) // 10:
                return None
            value = value * 10 + digit
        offsets.append(<int64_t>value)
    return offsets
