//! The machine code's memory: one range of addresses, reserved when the backend is made,
//! that every function's code is placed in and given back to when the function is freed.
//!
//! Cranelift's JIT module, left to itself, maps fresh pages for each function and unmaps
//! them when the function is freed: a bridge of 300 bytes takes a page of its own, and
//! each function costs an `mmap`, an `mprotect`, an `munmap` and a page fault. A loop
//! of many ways compiles thousands of bridges (`benches/cliffs/branchy400.fg` 12,400), and
//! its system time was a tenth to a sixth of its run. Here functions are packed one after
//! another (on [`super::LOOP_ALIGN`] boundaries, as `Backend::define` asks), and freed blocks
//! are reused, as in LuaJIT's machine-code areas.
//!
//! Code is never writable and executable at the same address (W^X). On x86-64 the memory
//! is mapped twice (a `memfd`, as .NET does on Linux): readable and executable where code
//! runs, readable and writable elsewhere, where a new function is written; placing one
//! costs no system call. Elsewhere (see [`Mapping::dual`]), or where no such memory can
//! be made, there is one mapping, and the pages a
//! new function goes in are made writable while it is written, then readable and
//! executable again: two `mprotect`s a function, and a page shared with live code is not
//! executable in between, which is safe because machine code never runs while the backend
//! compiles (the driver compiles between runs, and no helper that machine code calls
//! compiles). With two `mprotect`s a bridge, `branchy400.fg` spent a sixth of its time in
//! the system.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// The shared heap; each function's code is a [`Block`] of it.
#[derive(Clone)]
pub(crate) struct CodeHeap(Arc<Mutex<Heap>>);

/// The reserved addresses.
enum Mapping {
    /// The memory mapped twice: where code runs, and where it is written.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Dual {
        exec: *mut u8,
        write: *mut u8,
        len: usize,
    },
    /// One mapping, its pages' protection changed while a function is written.
    Single(region::Allocation),
}

// SAFETY: the mappings are only address ranges; the heap is used behind its mutex.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Mapping::Dual { exec, write, len } = *self {
            // SAFETY: both views were mapped with this length and nothing runs or holds
            // code in them any more (every block holds the heap).
            unsafe {
                libc::munmap(exec.cast(), len);
                libc::munmap(write.cast(), len);
            }
        }
    }
}

impl Mapping {
    /// `size` bytes mapped twice, if the system makes such memory. Only on x86-64, whose
    /// instruction fetch sees stores through any address: aarch64 code is run under
    /// qemu-user by the tests, and qemu finds code that changed by the address it was
    /// written at, so that code written through the other view, in a block given back and
    /// reused, ran as it was before.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn dual(size: usize) -> Option<Mapping> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: plain system calls on a descriptor of our own; each result is checked.
        unsafe {
            let fd = libc::memfd_create(c"flowjit-code".as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return None;
            }
            // Closed when the mappings are made: they keep the memory.
            let fd = OwnedFd::from_raw_fd(fd);
            if libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) != 0 {
                return None;
            }
            let map = |prot| {
                let at = libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    prot,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                );
                (at != libc::MAP_FAILED).then_some(at.cast::<u8>())
            };
            let exec = map(libc::PROT_READ | libc::PROT_EXEC)?;
            let Some(write) = map(libc::PROT_READ | libc::PROT_WRITE) else {
                libc::munmap(exec.cast(), size);
                return None;
            };
            Some(Mapping::Dual {
                exec,
                write,
                len: size,
            })
        }
    }

    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    fn dual(_size: usize) -> Option<Mapping> {
        None
    }

    fn base(&self) -> usize {
        match self {
            Mapping::Dual { exec, .. } => *exec as usize,
            Mapping::Single(region) => region.as_ptr::<u8>() as usize,
        }
    }

    fn len(&self) -> usize {
        match self {
            Mapping::Dual { len, .. } => *len,
            Mapping::Single(region) => region.len(),
        }
    }
}

struct Heap {
    mapping: Mapping,
    /// Everything at or past this offset has never been handed out, or was given back.
    top: usize,
    /// Free blocks below `top`, offset to length, none adjacent to another.
    holes: BTreeMap<usize, usize>,
    /// The same blocks as (length, offset): the smallest that fits is found at once.
    by_size: BTreeSet<(usize, usize)>,
    page: usize,
}

impl CodeHeap {
    /// Reserves `size` bytes of addresses (no memory until used); `dual` asks for the
    /// memory mapped twice where the system can.
    pub(crate) fn new(size: usize, dual: bool) -> io::Result<CodeHeap> {
        let page = region::page::size();
        let size = size.div_ceil(page) * page;
        let mapping = match dual.then(|| Mapping::dual(size)).flatten() {
            Some(m) => m,
            None => Mapping::Single(
                region::alloc(size, region::Protection::NONE).map_err(io::Error::other)?,
            ),
        };
        Ok(CodeHeap(Arc::new(Mutex::new(Heap {
            mapping,
            top: 0,
            holes: BTreeMap::new(),
            by_size: BTreeSet::new(),
            page,
        }))))
    }

    /// Whether code is written through a second mapping (no system call a function).
    #[cfg(test)]
    fn is_dual(&self) -> bool {
        matches!(self.lock().mapping, Mapping::Dual { .. })
    }

    /// Places `code` at an address that is a multiple of `align`, executable: its block.
    pub(crate) fn place(&self, code: &[u8], align: usize) -> io::Result<Block> {
        let mut heap = self.lock();
        let size = code.len().max(1);
        let off = heap
            .allocate(size, align.max(16))
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "the code heap is full"))?;
        if let Err(e) = heap.write(off, code) {
            heap.give_back(off, size);
            return Err(e);
        }
        Ok(Block {
            heap: self.clone(),
            off,
            len: size,
            at: heap.mapping.base() + off,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Heap> {
        // A panic while the lock was held leaves the free list as it was between calls.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of addresses handed out and not given back, holes included (for tests).
    #[cfg(test)]
    fn extent(&self) -> usize {
        self.lock().top
    }
}

/// A function's block of the code heap, given back when dropped.
pub(crate) struct Block {
    heap: CodeHeap,
    off: usize,
    len: usize,
    at: usize,
}

impl Block {
    /// Where the code starts.
    pub(crate) fn ptr(&self) -> *const u8 {
        self.at as *const u8
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // The driver drops a function's code only when nothing runs it or jumps to it any
        // more: machine code is not running (the driver compiles between runs), and the
        // exits linked to it were made to go to its successor first.
        self.heap.lock().give_back(self.off, self.len);
    }
}

fn align_up(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}

impl Heap {
    fn base(&self) -> usize {
        self.mapping.base()
    }

    /// The offset of a free block of `size` bytes whose address is a multiple of `align`:
    /// in the smallest hole sure to hold it whatever its alignment, or past everything
    /// handed out.
    fn allocate(&mut self, size: usize, align: usize) -> Option<usize> {
        let base = self.base();
        let found = self.by_size.range((size + align - 1, 0)..).next().copied();
        let at = match found {
            Some((len, off)) => {
                self.remove_hole(off, len);
                let at = align_up(base + off, align) - base;
                if at > off {
                    self.add_hole(off, at - off);
                }
                if at + size < off + len {
                    self.add_hole(at + size, off + len - at - size);
                }
                at
            }
            None => {
                let at = align_up(base + self.top, align) - base;
                if at + size > self.mapping.len() {
                    return None;
                }
                if at > self.top {
                    self.give_back(self.top, at - self.top);
                }
                self.top = at + size;
                at
            }
        };
        Some(at)
    }

    fn add_hole(&mut self, off: usize, len: usize) {
        self.holes.insert(off, len);
        self.by_size.insert((len, off));
    }

    fn remove_hole(&mut self, off: usize, len: usize) {
        self.holes.remove(&off);
        self.by_size.remove(&(len, off));
    }

    /// Returns a block, merging it with the free space on either side.
    fn give_back(&mut self, mut off: usize, mut len: usize) {
        if let Some((&before, &blen)) = self.holes.range(..off).next_back() {
            if before + blen == off {
                self.remove_hole(before, blen);
                off = before;
                len += blen;
            }
        }
        if let Some(&alen) = self.holes.get(&(off + len)) {
            self.remove_hole(off + len, alen);
            len += alen;
        }
        if off + len == self.top {
            self.top = off;
        } else {
            self.add_hole(off, len);
        }
    }

    /// The address and length of the pages `[off, off + len)` touches.
    fn pages(&self, off: usize, len: usize) -> (usize, usize) {
        let start = off / self.page * self.page;
        (self.base() + start, align_up(off + len, self.page) - start)
    }

    /// Sets the protection of the pages `[off, off + len)` touches.
    fn protect(&self, off: usize, len: usize, prot: region::Protection) -> io::Result<()> {
        let (at, bytes) = self.pages(off, len);
        // SAFETY: the pages are inside the reservation; the code on them that is not being
        // written is not running (the module's documentation).
        unsafe { region::protect(at as *const u8, bytes, prot) }.map_err(io::Error::other)
    }
}

impl Heap {
    /// Writes `code` at offset `off` and makes it executable.
    fn write(&self, off: usize, code: &[u8]) -> io::Result<()> {
        let exec = (self.base() + off) as *mut u8;
        match self.mapping {
            Mapping::Dual { write, .. } => {
                // SAFETY: the block is inside both views, handed out to this function and
                // not yet run.
                unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), write.add(off), code.len()) };
            }
            Mapping::Single(_) => {
                self.protect(off, code.len(), region::Protection::READ_WRITE)?;
                // SAFETY: the block is inside the reservation, writable now.
                unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), exec, code.len()) };
            }
        }
        // SAFETY: the block was just written and is not yet run. Before the pages become
        // executable: some cores have had errata about cleaning caches of read-only memory.
        unsafe { wasmtime_internal_jit_icache_coherence::clear_cache(exec.cast(), code.len()) }?;
        if let Mapping::Single(_) = self.mapping {
            self.protect(off, code.len(), region::Protection::READ_EXECUTE)?;
        }
        wasmtime_internal_jit_icache_coherence::pipeline_flush_mt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ret` on both ISAs flowjit emits code for.
    fn ret() -> Vec<u8> {
        if cfg!(target_arch = "aarch64") {
            vec![0xc0, 0x03, 0x5f, 0xd6]
        } else {
            vec![0xc3]
        }
    }

    fn blocks_are_aligned_disjoint_and_reused_once_given_back(dual: bool) {
        let heap = CodeHeap::new(1 << 20, dual).expect("a reservation");
        let mut code = ret();
        code.resize(300, 0);
        let a = heap.place(&code, 64).unwrap();
        let b = heap.place(&code[..100], 64).unwrap();
        let (pa, pb) = (a.ptr() as usize, b.ptr() as usize);
        assert_eq!((pa % 64, pb % 64), (0, 0));
        assert!(pb >= pa + 300, "b overlaps a");
        // SAFETY: each block starts with a `ret`, and the code heap made it executable.
        unsafe {
            std::mem::transmute::<usize, extern "C" fn()>(pa)();
            std::mem::transmute::<usize, extern "C" fn()>(pb)();
        }
        let extent = heap.extent();
        drop(a);
        let c = heap.place(&code[..200], 64).unwrap();
        assert_eq!(c.ptr() as usize, pa, "the freed block is reused first");
        assert_eq!(heap.extent(), extent, "no new space was taken");
        // SAFETY: as above, the block written again.
        unsafe { std::mem::transmute::<usize, extern "C" fn()>(c.ptr() as usize)() };
        drop(b);
        drop(c);
        assert_eq!(heap.extent(), 0, "everything given back merges into one");
    }

    #[test]
    fn blocks_of_the_dual_mapping_are_placed_run_and_reused() {
        let heap = CodeHeap::new(1 << 16, true).expect("a reservation");
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert!(heap.is_dual(), "Linux makes memory mapped twice");
        }
        blocks_are_aligned_disjoint_and_reused_once_given_back(true);
    }

    #[test]
    fn blocks_of_one_mapping_are_placed_run_and_reused() {
        assert!(!CodeHeap::new(1 << 16, false).unwrap().is_dual());
        blocks_are_aligned_disjoint_and_reused_once_given_back(false);
    }

    #[test]
    fn a_full_heap_refuses() {
        let heap = CodeHeap::new(1 << 16, true).expect("a reservation");
        assert!(heap.place(&vec![0; 1 << 17], 16).is_err());
        let fits = heap.place(&vec![0; 1 << 15], 16);
        assert!(fits.is_ok());
    }
}
