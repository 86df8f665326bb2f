//! The machine code's memory: one range of addresses, reserved when the backend is made,
//! that every function's code is placed in and given back to when the function is freed.
//!
//! Cranelift's JIT module, left to itself, maps fresh pages for each function and unmaps
//! them when the function is freed: a bridge of 300 bytes takes a page of its own, and
//! each function costs an `mmap`, an `mprotect`, an `munmap` and a page fault. A loop
//! of many ways compiles thousands of bridges (`benches/cliffs/branchy400.fg` 12,400), and
//! its system time was a tenth to a sixth of its run. Here functions are packed one after
//! another (on [`super::LOOP_ALIGN`] boundaries, as `Backend::define` asks), freed blocks
//! are reused, and a function costs two `mprotect`s of its own pages, as in LuaJIT's
//! machine-code areas.
//!
//! Code is never writable and executable at once (W^X): the pages a new function goes in
//! are made writable while Cranelift writes and relocates it, then readable and
//! executable. A page shared with live code is not executable in between; that is safe
//! because machine code never runs while the backend compiles (the driver compiles
//! between runs, and no helper that machine code calls compiles).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use cranelift_jit::{BranchProtection, JITMemoryKind, JITMemoryProvider};
use cranelift_module::{ModuleError, ModuleResult};

/// The shared heap; each function's JIT module gets a [`Provider`] of it.
#[derive(Clone)]
pub(crate) struct CodeHeap(Arc<Mutex<Heap>>);

struct Heap {
    /// The reservation (unmapped when the last provider and the backend are gone).
    region: region::Allocation,
    /// Everything at or past this offset has never been handed out, or was given back.
    top: usize,
    /// Free blocks below `top`, offset to length, none adjacent to another.
    holes: BTreeMap<usize, usize>,
    /// The same blocks as (length, offset): the smallest that fits is found at once.
    by_size: BTreeSet<(usize, usize)>,
    page: usize,
}

// SAFETY: the reservation's pointer is only an address range; the heap is used behind its
// mutex.
unsafe impl Send for Heap {}

impl CodeHeap {
    /// Reserves `size` bytes of addresses (no memory until used).
    pub(crate) fn new(size: usize) -> io::Result<CodeHeap> {
        let page = region::page::size();
        let size = size.div_ceil(page) * page;
        let region = region::alloc(size, region::Protection::NONE).map_err(io::Error::other)?;
        Ok(CodeHeap(Arc::new(Mutex::new(Heap {
            region,
            top: 0,
            holes: BTreeMap::new(),
            by_size: BTreeSet::new(),
            page,
        }))))
    }

    /// A memory provider for one JIT module.
    pub(crate) fn provider(&self) -> Box<dyn JITMemoryProvider + Send> {
        Box::new(Provider {
            heap: self.clone(),
            blocks: Vec::new(),
            finalized: 0,
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

fn align_up(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}

impl Heap {
    fn base(&self) -> usize {
        self.region.as_ptr::<u8>() as usize
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
                if at + size > self.region.len() {
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

/// The memory of one JIT module: the blocks it was given.
struct Provider {
    heap: CodeHeap,
    /// (offset, length) of each block.
    blocks: Vec<(usize, usize)>,
    /// How many of `blocks` are readable and executable already.
    finalized: usize,
}

impl JITMemoryProvider for Provider {
    fn allocate(&mut self, size: usize, align: u64, kind: JITMemoryKind) -> io::Result<*mut u8> {
        if !matches!(kind, JITMemoryKind::Executable) {
            // Functions are compiled with no data objects of their own.
            return Err(io::Error::other("the code heap holds only code"));
        }
        let mut heap = self.heap.lock();
        let size = size.max(1);
        let align = usize::try_from(align).unwrap_or(usize::MAX).max(16);
        let off = heap
            .allocate(size, align)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "the code heap is full"))?;
        if let Err(e) = heap.protect(off, size, region::Protection::READ_WRITE) {
            heap.give_back(off, size);
            return Err(e);
        }
        self.blocks.push((off, size));
        Ok((heap.base() + off) as *mut u8)
    }

    unsafe fn free_memory(&mut self) {
        let mut heap = self.heap.lock();
        for (off, len) in self.blocks.drain(..) {
            heap.give_back(off, len);
        }
        self.finalized = 0;
    }

    fn finalize(&mut self, branch_protection: BranchProtection) -> ModuleResult<()> {
        let heap = self.heap.lock();
        let backend = |e: io::Error| ModuleError::Backend(anyhow::Error::new(e));
        for &(off, len) in &self.blocks[self.finalized..] {
            let ptr = (heap.base() + off) as *const std::ffi::c_void;
            // Before the pages become executable: some cores have had errata about
            // cleaning caches of read-only memory.
            // SAFETY: the block is this module's, written and not yet run.
            unsafe { wasmtime_internal_jit_icache_coherence::clear_cache(ptr, len) }
                .map_err(backend)?;
            heap.protect(off, len, region::Protection::READ_EXECUTE)
                .map_err(backend)?;
            if branch_protection == BranchProtection::BTI {
                let (at, bytes) = heap.pages(off, len);
                protect_bti(at, bytes).map_err(backend)?;
            }
        }
        self.finalized = self.blocks.len();
        wasmtime_internal_jit_icache_coherence::pipeline_flush_mt().map_err(backend)?;
        Ok(())
    }
}

/// Adds Arm's branch target identification to executable pages, where the core has it.
#[allow(unused_variables)]
fn protect_bti(at: usize, bytes: usize) -> io::Result<()> {
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    if std::arch::is_aarch64_feature_detected!("bti") {
        const PROT_BTI: libc::c_int = 0x10;
        let prot = libc::PROT_EXEC | libc::PROT_READ | PROT_BTI;
        // SAFETY: pages of the reservation, already readable and executable.
        if unsafe { libc::mprotect(at as *mut libc::c_void, bytes, prot) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_reused_once_given_back() {
        let heap = CodeHeap::new(1 << 20).expect("a reservation");
        let mut a = heap.provider();
        let mut b = heap.provider();
        let pa = a.allocate(300, 64, JITMemoryKind::Executable).unwrap() as usize;
        let pb = b.allocate(100, 64, JITMemoryKind::Executable).unwrap() as usize;
        assert_eq!((pa % 64, pb % 64), (0, 0));
        assert!(pb >= pa + 300, "b overlaps a");
        // Both are written while writable, then run as code.
        // SAFETY: the blocks were just allocated with these sizes.
        unsafe {
            std::ptr::write_bytes(pa as *mut u8, 0xc3, 300);
            std::ptr::write_bytes(pb as *mut u8, 0xc3, 100);
        }
        a.finalize(BranchProtection::None).unwrap();
        b.finalize(BranchProtection::None).unwrap();
        #[cfg(target_arch = "x86_64")]
        {
            // 0xc3 is `ret`: both blocks run, b's page made executable again after a's.
            // SAFETY: each block starts with a `ret`.
            unsafe {
                std::mem::transmute::<usize, extern "C" fn()>(pa)();
                std::mem::transmute::<usize, extern "C" fn()>(pb)();
            }
        }
        let extent = heap.extent();
        // SAFETY: nothing runs either block.
        unsafe { a.free_memory() };
        let mut c = heap.provider();
        let pc = c.allocate(200, 64, JITMemoryKind::Executable).unwrap() as usize;
        assert_eq!(pc, pa, "the freed block is reused first");
        assert_eq!(heap.extent(), extent, "no new space was taken");
        // SAFETY: nothing runs either block.
        unsafe {
            b.free_memory();
            c.free_memory();
        }
        assert_eq!(heap.extent(), 0, "everything given back merges into one");
    }

    #[test]
    fn a_full_heap_refuses_and_data_is_refused() {
        let heap = CodeHeap::new(1 << 16).expect("a reservation");
        let mut a = heap.provider();
        assert!(a.allocate(1 << 17, 16, JITMemoryKind::Executable).is_err());
        assert!(a.allocate(64, 16, JITMemoryKind::ReadOnly).is_err());
        assert!(a.allocate(1 << 15, 16, JITMemoryKind::Executable).is_ok());
    }
}
