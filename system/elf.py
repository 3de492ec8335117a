"""Reading ELF files, as far as scenc needs: can a library be preloaded, can a program be traced.

The allocator registry checks a library before it is LD_PRELOADed (the
loader ignores an unusable one with just a line on stderr); the capture
checks a program before ltrace or the preload tracer runs it (static, a
script, BIND_NOW, which allocator functions it imports through the PLT).
One reader of the header, the segments and the dynamic entries serves both.
Stdlib only; a damaged file raises struct.error or ValueError, never more.
"""

import functools
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Iterator, Optional, Tuple

MAGIC = b"\x7fELF"
ET_DYN = 3
PT_DYNAMIC, PT_INTERP = 2, 3
SHT_SYMTAB, SHT_RELA, SHT_DYNAMIC, SHT_REL, SHT_DYNSYM = 2, 4, 6, 9, 11
STT_FUNC, STT_GNU_IFUNC = 2, 10
DT_NULL, DT_BIND_NOW, DT_FLAGS, DT_FLAGS_1 = 0, 24, 30, 0x6FFFFFFB
DF_BIND_NOW, DF_1_NOW, DF_1_PIE = 0x8, 0x1, 0x08000000

MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390x", 40: "arm",
            62: "x86-64", 183: "aarch64", 243: "riscv", 258: "loongarch"}
_JUMP_SLOT = {62: 7, 3: 7, 183: 1026}      # R_*_JUMP_SLOT of EM_X86_64, EM_386, EM_AARCH64
_GLOB_DAT = {62: 6, 3: 6, 183: 1025}       # R_*_GLOB_DAT


@dataclass(frozen=True)
class Header:
    bits: int
    endian: str             # struct's "<" or ">"
    elf_type: int
    machine: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int

    @property
    def abi(self) -> str:
        return f"{MACHINES.get(self.machine, f'machine {self.machine}')} ({self.bits}-bit)"

    @property
    def word(self) -> int:
        return self.bits // 8


def parse_header(head) -> Optional[Header]:
    """The ELF header at the start of `head` (bytes, mmap), or None if it is not one."""
    if len(head) < 52 or head[:4] != MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    bits = 32 if head[4] == 1 else 64
    endian = "<" if head[5] == 1 else ">"
    if bits == 64:
        if len(head) < 64:
            return None
        fmt = "HHIQQQIHHHHHH"
    else:
        fmt = "HHIIIIIHHHHHH"
    (elf_type, machine, _version, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum,
     _shstrndx) = struct.unpack_from(endian + fmt, head, 16)
    return Header(bits, endian, elf_type, machine, phoff, shoff, phentsize, phnum, shentsize, shnum)


def read_header(path: str) -> Optional[Header]:
    with open(path, "rb") as f:
        return parse_header(f.read(64))


def segments(data, h: Header) -> Iterator[Tuple[int, int, int]]:
    """(p_type, p_offset, p_filesz) of every program header."""
    for i in range(h.phnum):
        off = h.phoff + i * h.phentsize
        if h.bits == 64:
            p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(h.endian + "IIQQQQ", data, off)
        else:
            p_type, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(h.endian + "IIIII", data, off)
        yield p_type, p_offset, p_filesz


def dynamic_entries(data, h: Header, offset: int, size: int) -> Iterator[Tuple[int, int]]:
    """(d_tag, d_val) of a dynamic table, up to DT_NULL."""
    fmt = h.endian + ("qQ" if h.bits == 64 else "iI")
    step = 2 * h.word
    for j in range(0, size - step + 1, step):
        tag, value = struct.unpack_from(fmt, data, offset + j)
        if tag == DT_NULL:
            return
        yield tag, value


def _mapped(path: str):
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def is_pie_executable(path: str, h: Header) -> bool:
    """A PIE program is ET_DYN like a library, but ld.so refuses to preload it."""
    with _mapped(path) as data:
        for p_type, p_offset, p_filesz in segments(data, h):
            if p_type != PT_DYNAMIC:
                continue
            for tag, value in dynamic_entries(data, h, p_offset, p_filesz):
                if tag == DT_FLAGS_1:
                    return bool(value & DF_1_PIE)
    return False


@functools.lru_cache(maxsize=None)
def host_header() -> Optional[Header]:
    """The ELF header of this interpreter: programs scenc builds have its ABI."""
    for exe in ("/proc/self/exe", sys.executable):
        try:
            header = read_header(os.path.realpath(exe))
        except OSError:
            continue
        if header is not None:
            return header
    return None


# --------------------------------------------------------------------------- programs to trace
@dataclass
class ElfInfo:
    path: str
    is_elf: bool = False
    bits: int = 0                          # 32 or 64 (0: not ELF)
    dynamic: bool = False                  # has a PT_DYNAMIC segment (else: statically linked)
    interpreter: Optional[str] = None      # PT_INTERP (ld.so)
    bind_now: bool = False                 # DT_BIND_NOW / DF_BIND_NOW / DF_1_NOW
    plt_symbols: set = field(default_factory=set)   # imported through a PLT slot (JUMP_SLOT)
    got_symbols: set = field(default_factory=set)   # imported through the GOT only (GLOB_DAT): address taken
    shebang: Optional[list] = None         # ['/usr/bin/env', 'python3'] for a '#!' script
    defined: set = field(default_factory=set)       # functions it defines itself (.dynsym/.symtab, global or weak)


def inspect(path: str) -> ElfInfo:
    """What matters to a tracer about an executable: dynamic or static, BIND_NOW, which allocator
    functions it reaches through PLT slots and which only through the GOT.  Never raises on bad files."""
    info = ElfInfo(path)
    try:
        with open(path, "rb") as f:
            head = f.read(512)
            if head[:2] == b"#!":
                info.shebang = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split() or None
                return info
            if head[:4] != MAGIC or len(head) < 52:
                return info
            info.is_elf = True
            info.bits = {1: 32, 2: 64}.get(head[4], 0)
            h = parse_header(head)
            if h is None:
                return info
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _read_program(data, h, info)
    except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError):
        pass
    return info


def _sections(data, h: Header) -> list:
    """(sh_type, sh_offset, sh_size, sh_link, sh_entsize) of every section header."""
    sections = []
    for i in range(h.shnum):
        off = h.shoff + i * h.shentsize
        fmt = "IIQQQQIIQQ" if h.bits == 64 else "IIIIIIIIII"
        _name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, _info, _align, sh_entsize = \
            struct.unpack_from(h.endian + fmt, data, off)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    return sections


def _read_program(data, h: Header, info: ElfInfo) -> None:
    for p_type, p_offset, p_filesz in segments(data, h):
        if p_type == PT_DYNAMIC:
            info.dynamic = True
        elif p_type == PT_INTERP:
            info.interpreter = data[p_offset:p_offset + p_filesz].split(b"\0")[0].decode()
    sections = _sections(data, h)
    for sh_type, off, size, link, entsize in sections:
        if sh_type == SHT_DYNAMIC:
            for tag, val in dynamic_entries(data, h, off, size):
                if tag == DT_BIND_NOW or (tag == DT_FLAGS and val & DF_BIND_NOW) or \
                        (tag == DT_FLAGS_1 and val & DF_1_NOW):
                    info.bind_now = True
        elif sh_type in (SHT_RELA, SHT_REL) and 0 <= link < len(sections):
            _imports(data, h, info, sections, sh_type, off, size, link, entsize)
        elif sh_type in (SHT_SYMTAB, SHT_DYNSYM) and entsize and 0 <= link < len(sections):
            _defined_functions(data, h, off, size, entsize, sections[link][1], info.defined)
    info.got_symbols -= info.plt_symbols


def _defined_functions(data, h: Header, off: int, size: int, entsize: int, str_off: int, into: set) -> None:
    """Names of the functions (or ifuncs) a symbol table defines, global or weak: a program
    that defines malloc brings its own allocator."""
    for j in range(off, off + size - entsize + 1, entsize):
        if h.bits == 64:
            st_name, st_info, _other, st_shndx = struct.unpack_from(h.endian + "IBBH", data, j)
        else:
            (st_name,) = struct.unpack_from(h.endian + "I", data, j)
            st_info, _other, st_shndx = struct.unpack_from(h.endian + "BBH", data, j + 12)
        if st_shndx == 0 or st_info >> 4 not in (1, 2) or st_info & 0xF not in (STT_FUNC, STT_GNU_IFUNC):
            continue                                    # undefined, local, or not a function
        start = str_off + st_name
        into.add(data[start:data.find(b"\0", start)].decode("ascii", "replace"))


def _imports(data, h: Header, info: ElfInfo, sections, sh_type, off, size, link, entsize) -> None:
    """The symbols one relocation section binds through a PLT slot or the GOT."""
    sym_type, sym_off, _sym_size, str_link, sym_entsize = sections[link]
    if sym_type != SHT_DYNSYM or not (0 <= str_link < len(sections)) or not sym_entsize:
        return
    str_off = sections[str_link][1]
    is64 = h.bits == 64
    entsize = entsize or ((24 if sh_type == SHT_RELA else 16) if is64 else (12 if sh_type == SHT_RELA else 8))
    for j in range(0, size - entsize + 1, entsize):
        if is64:
            _roff, r_info = struct.unpack_from(h.endian + "QQ", data, off + j)
            r_type, r_sym = r_info & 0xFFFFFFFF, r_info >> 32
        else:
            _roff, r_info = struct.unpack_from(h.endian + "II", data, off + j)
            r_type, r_sym = r_info & 0xFF, r_info >> 8
        if not r_sym:
            continue
        st_name = struct.unpack_from(h.endian + "I", data, sym_off + r_sym * sym_entsize)[0]
        name = data[str_off + st_name:data.find(b"\0", str_off + st_name)].decode()
        if r_type == _JUMP_SLOT.get(h.machine):
            info.plt_symbols.add(name)
        elif r_type == _GLOB_DAT.get(h.machine):
            info.got_symbols.add(name)
