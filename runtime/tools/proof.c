/* libscnproof.so: the preload proof for programs scenc did not compile.
 *
 * Preloaded after the allocator under test, it asks the dynamic linker which
 * shared object serves malloc and free for this process (dlsym with
 * RTLD_DEFAULT searches the global scope in the order the program's own
 * calls are bound: the executable, the preloads, then its libraries) and
 * appends one line to the file named by SCENC_PROOF_FILE:
 *
 *   <pid>\t<object serving malloc>\t<object serving free>\n
 *
 * It does so when it is loaded, not at exit: the binding is fixed by then,
 * and a proof taken at load also covers a program that ends with _exit or
 * a signal. Nothing here calls malloc (but see first_definition): the line
 * is built on the stack and written with one write(2) on an O_APPEND file,
 * so processes started by the command (each loads this library again) add
 * their own whole lines.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096

/* The first object after the main program, in link-map order (the order of
 * the global scope: preloads, then libraries), that defines `symbol` itself.
 * Only this path allocates (dlopen of a loaded object builds its search
 * list); the allocator under test serves it. */
static const char *first_definition(const char *symbol) {
    struct link_map *l = NULL;
    void *main_handle = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!main_handle || dlinfo(main_handle, RTLD_DI_LINKMAP, &l) != 0 || !l)
        return "?";
    for (l = l->l_next; l; l = l->l_next) {
        Dl_info info;
        void *handle, *address;
        int defines;
        if (!l->l_name[0] || strstr(l->l_name, "linux-vdso"))
            continue;
        handle = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (!handle)
            continue;
        address = dlsym(handle, symbol);
        defines = address && dladdr(address, &info) && info.dli_fname && !strcmp(info.dli_fname, l->l_name);
        dlclose(handle);
        if (defines)
            return l->l_name;
    }
    return "?";
}

/* The object defining `symbol`, or "?" when the linker cannot say. The main
 * program (first in the link map; dladdr names it by argv[0] or "") is named
 * through /proc/self/exe. A non-PIE program that takes the function's address
 * (python3) has a canonical PLT stub for it: dlsym finds the stub in the
 * program, which only jumps to the real definition, and the program's symbol
 * for it is undefined (SHN_UNDEF with the stub's address); then the
 * definition is the first one in the global scope after the program. */
static const char *provider(const char *symbol, char *exe, size_t exe_size) {
    Dl_info info;
    struct link_map *object = NULL;
    const ElfW(Sym) *entry = NULL;
    void *address = dlsym(RTLD_DEFAULT, symbol);
    if (!address || !dladdr1(address, &info, (void **)&object, RTLD_DL_LINKMAP) || !info.dli_fname)
        return "?";
    if (object && object->l_prev)
        return info.dli_fname;
    if (!dladdr1(address, &info, (void **)&entry, RTLD_DL_SYMENT) || !entry || entry->st_shndx == SHN_UNDEF)
        return first_definition(symbol);
    ssize_t n = readlink("/proc/self/exe", exe, exe_size - 1);
    if (n <= 0)
        return "?";
    exe[n] = '\0';
    return exe;
}

static size_t append(char *line, size_t at, const char *text) {
    size_t n = strlen(text);
    if (at + n >= LINE_MAX_BYTES)
        n = LINE_MAX_BYTES - 1 - at;
    memcpy(line + at, text, n);
    return at + n;
}

static size_t append_pid(char *line, size_t at) {
    char digits[24];
    int i = (int)sizeof digits;
    long pid = (long)getpid();
    digits[--i] = '\0';
    do {
        digits[--i] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid && i > 0);
    return append(line, at, digits + i);
}

__attribute__((constructor)) static void scn_prove_allocator(void) {
    const char *path = getenv("SCENC_PROOF_FILE");
    if (!path || !*path)
        return;
    char line[LINE_MAX_BYTES], exe_m[1024], exe_f[1024];
    size_t at = append_pid(line, 0);
    at = append(line, at, "\t");
    at = append(line, at, provider("malloc", exe_m, sizeof exe_m));
    at = append(line, at, "\t");
    at = append(line, at, provider("free", exe_f, sizeof exe_f));
    at = append(line, at, "\n");
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;   /* no line: scenc records the run as unproven */
    if (write(fd, line, at) < 0) { /* likewise */ }
    close(fd);
}
