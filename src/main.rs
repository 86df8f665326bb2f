//! The `flowjit` binary.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_long, c_void};

// The crate links mimalloc's library; its functions are declared below.
extern crate mimalloc;

/// mimalloc: the optimizer and Cranelift allocate and free many small vectors and maps for
/// every trace they compile, which glibc's allocator made a tenth of the work. Its version 2
/// (the crate's `v2`): version 3 took half a millisecond more to start a process (1.8 ms
/// against 1.3 ms for `flowjit --version`), and compiled no faster.
#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

// mimalloc's functions and options (its `mimalloc.h`; the crate's bindings do not name the
// option needed).
unsafe extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_malloc(size: usize) -> *mut c_void;
    fn mi_zalloc(size: usize) -> *mut c_void;
    fn mi_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn mi_free(p: *mut c_void);
    fn mi_malloc_aligned(size: usize, alignment: usize) -> *mut c_void;
    fn mi_zalloc_aligned(size: usize, alignment: usize) -> *mut c_void;
    fn mi_realloc_aligned(p: *mut c_void, size: usize, alignment: usize) -> *mut c_void;
}

/// mimalloc as the global allocator, through its plain functions wherever every block it
/// gives is aligned enough: the `mimalloc` crate's allocator asks for an alignment on every
/// allocation, whose path in mimalloc is about twice as long (an array made by machine code
/// allocates twice).
struct Mimalloc;

/// The alignment every block mimalloc gives has (`MI_INTPTR_SIZE`).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: mimalloc's functions meet `GlobalAlloc`'s contract; a layout whose alignment is
// above what every block has goes to the aligned ones.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions, for any size.
        unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi_malloc(layout.size()) as *mut u8
            } else {
                mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi_zalloc(layout.size()) as *mut u8
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from mimalloc (either kind of block is freed so).
        unsafe { mi_free(ptr as *mut c_void) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from mimalloc with `layout`'s alignment.
        unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

/// `mi_option_purge_delay` in mimalloc 2's `mi_option_e`: how long freed memory stays with
/// the process before it is given back to the system, in milliseconds (10), or -1: never.
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// Freed memory is kept, not given back: the next allocation finds it mapped. Given back
/// after 10 ms (mimalloc's default), it was taken again a little later and every page of it
/// faulted and was zeroed anew by the kernel (2 MiB at a time under transparent huge
/// pages): `flowjit pe --compile --run` of mandel.b frees what partial evaluation used, and
/// Cranelift then allocated as much again, for a tenth of the run's time. A
/// `MIMALLOC_PURGE_DELAY` in the environment is left as it is (the option then differs
/// from the default, 10).
fn keep_freed_memory() {
    // SAFETY: mimalloc's own functions, called before any other thread exists.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == 10 {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

fn main() -> std::process::ExitCode {
    keep_freed_memory();
    flowjit::cli::main()
}
