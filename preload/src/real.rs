//! The real libc functions behind the interposed ones, resolved with `dlsym(RTLD_NEXT, …)`
//! on first use and kept in an atomic pointer (a race resolves twice, to the same address).

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// One real function, found lazily.
#[derive(Debug)]
pub struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    /// The real function called `name`.
    pub const fn new(name: &'static CStr) -> Self {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Its address, or null if no later object defines it.
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() { self.resolve() } else { p }
    }

    #[cold]
    fn resolve(&self) -> *mut c_void {
        // SAFETY: dlsym with a valid NUL-terminated name; RTLD_NEXT searches the objects
        // loaded after this one (libc).
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Relaxed);
        p
    }
}

/// Calls the real function `$real` (a [`Real`]) of type `$ty` with `$args`; if it cannot be
/// found, sets `errno` to `ENOSYS` and evaluates to `$fail`. The arguments are plain values
/// (descriptors, sizes, the caller's own pointers) forwarded unchanged, so expanding them in
/// the `unsafe` call is intended (`clippy::macro_metavars_in_unsafe` is allowed in lib.rs).
#[macro_export]
macro_rules! call_real {
    ($real:expr, $ty:ty, $fail:expr, ($($arg:expr),* $(,)?)) => {{
        let p = $real.get();
        if p.is_null() {
            // SAFETY: this thread's errno slot.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            $fail
        } else {
            // SAFETY: `p` is the address of the libc function of this name, whose C
            // signature is `$ty`.
            let f: $ty = unsafe { std::mem::transmute::<*mut std::ffi::c_void, $ty>(p) };
            // SAFETY: forwarded exactly as the caller passed them.
            unsafe { f($($arg),*) }
        }
    }};
}
