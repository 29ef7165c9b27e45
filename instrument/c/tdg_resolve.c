/* tdg_resolve.c: see tdg_resolve.h. Runs once per interposed routine, on its
 * first call, so nothing here is on the per-call path. */
#define _GNU_SOURCE
#include "tdg_resolve.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Objects the walk of step 3 can hold; a process with more is reported as
 * not fully searched rather than searched past a fixed buffer. */
#define TDG_MAX_OBJECTS 1024

struct tdg_object_list {
    const char *names[TDG_MAX_OBJECTS]; /* link_map names, "" for the program */
    int count;
    int missed;
    ElfW(Addr) skip; /* load bias of the interposer */
};

/* Only copies pointers: loading or looking up inside the callback would run
 * the dynamic linker while dl_iterate_phdr holds its lock. The names stay
 * valid because nothing is unloaded while the first call is being served. */
static int collect_object(struct dl_phdr_info *info, size_t size, void *data) {
    struct tdg_object_list *list = data;
    (void)size;
    if (info->dlpi_addr == list->skip && info->dlpi_name && info->dlpi_name[0])
        return 0;
    if (list->count < TDG_MAX_OBJECTS)
        list->names[list->count++] = info->dlpi_name ? info->dlpi_name : "";
    else
        list->missed++;
    return 0;
}

static const char *program_path(void) {
    static char exe[4096];
    if (!exe[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            strcpy(exe, "the program");
        else
            exe[n] = '\0';
    }
    return exe;
}

/* The object containing `addr`, or NULL. */
static struct link_map *object_of(const void *addr) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!addr || !dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP))
        return NULL;
    return map;
}

static const char *object_name(const struct link_map *map) {
    return map && map->l_name && map->l_name[0] ? map->l_name : program_path();
}

/* `symbol` as seen from the object named `name` ("" = the program): the
 * object itself, then its dependencies in the dynamic linker's order. */
static void *lookup_in(const char *name, const char *symbol) {
    void *handle = dlopen(name[0] ? name : NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return NULL;
    void *found = dlsym(handle, symbol);
    dlclose(handle); /* RTLD_NOLOAD took a reference; give it back */
    return found;
}

/* Accepts `found` unless it is the interposer's own definition. */
static void *accept(void *found, const struct link_map *self, char *defined_in,
                    unsigned long cap) {
    if (!found)
        return NULL;
    const struct link_map *where = object_of(found);
    if (where && where == self)
        return NULL;
    snprintf(defined_in, cap, "%s", object_name(where));
    return found;
}

/* Appends to `line` (capacity `cap`, `*len` used), truncating at the end. */
__attribute__((format(printf, 4, 5))) static void append(char *line, size_t cap, size_t *len,
                                                        const char *fmt, ...) {
    if (*len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

static void give_up(const char *symbol, const struct tdg_object_list *list,
                    void (*before_exit)(void)) {
    /* One line, however many objects: a user reads "not in any of these".
     * The tail is kept free so a truncated list still ends the line. */
    char line[8192];
    const size_t tail = 64;
    size_t len = 0;
    append(line, sizeof line - tail, &len,
           "tdg shim: %s is defined in none of the %d loaded objects, so there is nothing to "
           "forward the call to; searched the global scope (RTLD_NEXT), then",
           symbol, list->count);
    for (int i = 0; i < list->count; i++)
        append(line, sizeof line - tail, &len, "%s %s", i ? "," : "",
               list->names[i][0] ? list->names[i] : program_path());
    if (list->missed)
        append(line, sizeof line - tail, &len, " (and %d more not searched)", list->missed);
    append(line, sizeof line, &len, "; exiting with status %d\n", TDG_EXIT_UNRESOLVED);
    if (before_exit)
        before_exit();
    fflush(NULL); /* the program's own output so far is not lost */
    (void)!write(2, line, len);
    _exit(TDG_EXIT_UNRESOLVED);
}

void *tdg_resolve(const char *symbol, const void *self, const void *caller, char *defined_in,
                  unsigned long cap, void (*before_exit)(void)) {
    const struct link_map *shim = object_of(self);
    void *found = accept(dlsym(RTLD_NEXT, symbol), shim, defined_in, cap);
    if (found)
        return found;

    const struct link_map *from = object_of(caller);
    if (from && from != shim) {
        found = accept(lookup_in(from->l_name ? from->l_name : "", symbol), shim, defined_in, cap);
        if (found)
            return found;
    }

    struct tdg_object_list list = {.count = 0};
    list.skip = shim ? shim->l_addr : 0;
    dl_iterate_phdr(collect_object, &list);
    for (int i = 0; i < list.count; i++) {
        found = accept(lookup_in(list.names[i], symbol), shim, defined_in, cap);
        if (found)
            return found;
    }
    give_up(symbol, &list, before_exit);
    return NULL;
}
