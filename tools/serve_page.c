/*
 * serve_page.c — the chat page of `pinfer serve` (tools/serve_page.html),
 * built into the binary with the assembler's .incbin: one file to edit, no
 * generated source, nothing to install beside the binary.
 */
#include "serve.h"

#ifdef PI_HAVE_SERVE
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        "pi_serve_page_start:\n"
        ".incbin \"tools/serve_page.html\"\n"
        "pi_serve_page_end:\n"
        ".byte 0\n"
        ".popsection\n");

const char *serve_page(size_t *len) {
    extern const char pi_serve_page_start[], pi_serve_page_end[];
    *len = (size_t)(pi_serve_page_end - pi_serve_page_start);
    return pi_serve_page_start;
}
#endif
