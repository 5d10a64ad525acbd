//! The handlers NVTX calls, and the tables that name them by callback id.
//!
//! Each handler starts the sender if needed, converts its arguments (strings and attribute
//! structs are the caller's, valid only during the call) and hands over to `crate::local`
//! (events) or `crate::registry` (definitions). Every body runs inside `catch_unwind`: a
//! panic must never unwind into the application's C frames, and aborting someone else's
//! process is not an option. The code is written not to panic; the guard is the backstop.

use std::ffi::{c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use crate::fast::{self, RawAttrs, RawMessage};
use crate::ffi::{self, CStr, EventAttributes, NO_PUSH_POP_TRACKING, WStr};
use crate::wire::Record;
use crate::{local, registry, sender, state};

/// Runs `f`, or returns `fallback` if it panicked.
#[inline]
fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(|| {
        sender::ensure_started();
        f()
    }))
    .unwrap_or(fallback)
}

/// A domain handle as the wire's domain id (NULL = 0 = the default domain).
fn domain_id(d: *const c_void) -> u64 {
    d as usize as u64
}

fn ascii<'a>(s: CStr) -> RawAttrs<'a> {
    // SAFETY: NVTX passes NULL or a NUL-terminated string valid during the call.
    RawAttrs::message(unsafe { fast::c_bytes(s) })
}

fn wide<'a>(s: WStr) -> RawAttrs<'a> {
    // SAFETY: as for `ascii`, with a wide string.
    RawAttrs::message(unsafe { fast::wide_units(s) })
}

fn ex<'a>(a: *const EventAttributes) -> RawAttrs<'a> {
    // SAFETY: NVTX passes NULL or the caller's attribute struct, valid during the call; the
    // parser checks its size and version before reading past them.
    unsafe { RawAttrs::from_event_attributes(a) }
}

/// An owned copy of a name (definitions are kept past the call).
fn owned(m: RawMessage<'_>) -> String {
    match m {
        RawMessage::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        RawMessage::Wide(w) => w
            .iter()
            .map(|&u| char::from_u32(u as u32).unwrap_or('\u{FFFD}'))
            .collect(),
        RawMessage::None | RawMessage::Registered(_) => String::new(),
    }
}

fn owned_a(s: CStr) -> String {
    owned(ascii(s).message)
}

fn owned_w(s: WStr) -> String {
    owned(wide(s).message)
}

// ---- CORE ----

extern "C" fn mark_ex(a: *const EventAttributes) {
    guard((), || local::mark(0, || ex(a)));
}
extern "C" fn mark_a(s: CStr) {
    guard((), || local::mark(0, || ascii(s)));
}
extern "C" fn mark_w(s: WStr) {
    guard((), || local::mark(0, || wide(s)));
}
extern "C" fn range_start_ex(a: *const EventAttributes) -> u64 {
    guard(0, || local::start(0, || ex(a)))
}
extern "C" fn range_start_a(s: CStr) -> u64 {
    guard(0, || local::start(0, || ascii(s)))
}
extern "C" fn range_start_w(s: WStr) -> u64 {
    guard(0, || local::start(0, || wide(s)))
}
extern "C" fn range_end(id: u64) {
    guard((), || local::end(0, id));
}
extern "C" fn range_push_ex(a: *const EventAttributes) -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::push(0, || ex(a)))
}
extern "C" fn range_push_a(s: CStr) -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::push(0, || ascii(s)))
}
extern "C" fn range_push_w(s: WStr) -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::push(0, || wide(s)))
}
extern "C" fn range_pop() -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::pop(0))
}
extern "C" fn name_category_a(category: u32, name: CStr) {
    guard((), || name_category(0, category, owned_a(name)));
}
extern "C" fn name_category_w(category: u32, name: WStr) {
    guard((), || name_category(0, category, owned_w(name)));
}
extern "C" fn name_os_thread_a(tid: u32, name: CStr) {
    guard((), || name_thread(tid, owned_a(name)));
}
extern "C" fn name_os_thread_w(tid: u32, name: WStr) {
    guard((), || name_thread(tid, owned_w(name)));
}

// ---- CORE2 ----

extern "C" fn domain_mark_ex(d: *const c_void, a: *const EventAttributes) {
    guard((), || local::mark(domain_id(d), || ex(a)));
}
extern "C" fn domain_range_start_ex(d: *const c_void, a: *const EventAttributes) -> u64 {
    guard(0, || local::start(domain_id(d), || ex(a)))
}
extern "C" fn domain_range_end(d: *const c_void, id: u64) {
    guard((), || local::end(domain_id(d), id));
}
extern "C" fn domain_range_push_ex(d: *const c_void, a: *const EventAttributes) -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::push(domain_id(d), || ex(a)))
}
extern "C" fn domain_range_pop(d: *const c_void) -> c_int {
    guard(NO_PUSH_POP_TRACKING, || local::pop(domain_id(d)))
}

/// What `nvtxDomainResourceCreate` returns: resources are not traced, but callers may treat
/// NULL as failure, so they get the address of this byte.
static RESOURCE: u8 = 0;

extern "C" fn domain_resource_create(_d: *const c_void, _attrs: *const c_void) -> *const c_void {
    guard(std::ptr::null(), || (&raw const RESOURCE).cast())
}
extern "C" fn domain_resource_destroy(_r: *const c_void) {
    guard((), || {});
}
extern "C" fn domain_name_category_a(d: *const c_void, category: u32, name: CStr) {
    guard((), || name_category(domain_id(d), category, owned_a(name)));
}
extern "C" fn domain_name_category_w(d: *const c_void, category: u32, name: WStr) {
    guard((), || name_category(domain_id(d), category, owned_w(name)));
}
extern "C" fn domain_register_string_a(d: *const c_void, s: CStr) -> *const c_void {
    guard(std::ptr::null(), || {
        register_string(domain_id(d), owned_a(s))
    })
}
extern "C" fn domain_register_string_w(d: *const c_void, s: WStr) -> *const c_void {
    guard(std::ptr::null(), || {
        register_string(domain_id(d), owned_w(s))
    })
}
extern "C" fn domain_create_a(name: CStr) -> *const c_void {
    guard(std::ptr::null(), || domain_create(owned_a(name)))
}
extern "C" fn domain_create_w(name: WStr) -> *const c_void {
    guard(std::ptr::null(), || domain_create(owned_w(name)))
}
extern "C" fn domain_destroy(d: *const c_void) {
    guard((), || {
        // `nvtxDomainDestroy(NULL)` happens (the Python package does it): nothing to say.
        if !d.is_null() {
            registry::define(&Record::DomainDestroy {
                ts_ns: state::now_ns(),
                domain: domain_id(d),
            });
        }
    });
}
extern "C" fn initialize(_reserved: *const c_void) {
    guard((), || {});
}

fn name_category(domain: u64, category: u32, name: String) {
    registry::define(&Record::NameCategory {
        ts_ns: state::now_ns(),
        domain,
        category,
        name: &name,
    });
}

fn name_thread(tid: u32, name: String) {
    registry::define(&Record::NameThread {
        ts_ns: state::now_ns(),
        tid,
        name: &name,
    });
}

fn register_string(domain: u64, text: String) -> *const c_void {
    let id = state::NEXT_STRING.fetch_add(1, Ordering::Relaxed);
    registry::define(&Record::RegisterString {
        ts_ns: state::now_ns(),
        domain,
        id,
        text: &text,
    });
    id as usize as *const c_void
}

fn domain_create(name: String) -> *const c_void {
    let domain = state::NEXT_DOMAIN.fetch_add(1, Ordering::Relaxed);
    registry::define(&Record::DomainCreate {
        ts_ns: state::now_ns(),
        domain,
        name: &name,
    });
    domain as usize as *const c_void
}

/// (callback id, handler) for the CORE module.
pub fn core_table() -> [(usize, ffi::FunctionPointer); 15] {
    use ffi::core::*;
    [
        (MARK_EX, mark_ex as *const c_void),
        (MARK_A, mark_a as *const c_void),
        (MARK_W, mark_w as *const c_void),
        (RANGE_START_EX, range_start_ex as *const c_void),
        (RANGE_START_A, range_start_a as *const c_void),
        (RANGE_START_W, range_start_w as *const c_void),
        (RANGE_END, range_end as *const c_void),
        (RANGE_PUSH_EX, range_push_ex as *const c_void),
        (RANGE_PUSH_A, range_push_a as *const c_void),
        (RANGE_PUSH_W, range_push_w as *const c_void),
        (RANGE_POP, range_pop as *const c_void),
        (NAME_CATEGORY_A, name_category_a as *const c_void),
        (NAME_CATEGORY_W, name_category_w as *const c_void),
        (NAME_OS_THREAD_A, name_os_thread_a as *const c_void),
        (NAME_OS_THREAD_W, name_os_thread_w as *const c_void),
    ]
}

/// (callback id, handler) for the CORE2 module.
pub fn core2_table() -> [(usize, ffi::FunctionPointer); 15] {
    use ffi::core2::*;
    [
        (DOMAIN_MARK_EX, domain_mark_ex as *const c_void),
        (
            DOMAIN_RANGE_START_EX,
            domain_range_start_ex as *const c_void,
        ),
        (DOMAIN_RANGE_END, domain_range_end as *const c_void),
        (DOMAIN_RANGE_PUSH_EX, domain_range_push_ex as *const c_void),
        (DOMAIN_RANGE_POP, domain_range_pop as *const c_void),
        (
            DOMAIN_RESOURCE_CREATE,
            domain_resource_create as *const c_void,
        ),
        (
            DOMAIN_RESOURCE_DESTROY,
            domain_resource_destroy as *const c_void,
        ),
        (
            DOMAIN_NAME_CATEGORY_A,
            domain_name_category_a as *const c_void,
        ),
        (
            DOMAIN_NAME_CATEGORY_W,
            domain_name_category_w as *const c_void,
        ),
        (
            DOMAIN_REGISTER_STRING_A,
            domain_register_string_a as *const c_void,
        ),
        (
            DOMAIN_REGISTER_STRING_W,
            domain_register_string_w as *const c_void,
        ),
        (DOMAIN_CREATE_A, domain_create_a as *const c_void),
        (DOMAIN_CREATE_W, domain_create_w as *const c_void),
        (DOMAIN_DESTROY, domain_destroy as *const c_void),
        (INITIALIZE, initialize as *const c_void),
    ]
}
