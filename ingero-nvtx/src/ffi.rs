//! `repr(C)` mirrors of the parts of NVTX's `nvtxDetail/nvtxTypes.h` and `nvToolsExt.h` a tool
//! needs: the export table, the module and callback ids, and `nvtxEventAttributes_t`. Written by
//! hand (no bindgen, no headers at build time); the layout is checked by the tests below and,
//! end to end, by the C programs of `tests/`.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `wchar_t` on Linux: UTF-32.
pub type WChar = i32;

/// `NvtxGetExportTableFunc_t`: what `InitializeInjectionNvtx2` receives.
pub type GetExportTable = unsafe extern "C" fn(export_table_id: u32) -> *const c_void;

/// `NVTX_ETID_CALLBACKS`.
pub const ETID_CALLBACKS: u32 = 1;

/// `NvtxFunctionPointer`: a slot holds one; the tool writes its handler there.
pub type FunctionPointer = *const c_void;

/// `NvtxExportTableCallbacks`.
#[repr(C)]
pub struct ExportTableCallbacks {
    /// `sizeof(NvtxExportTableCallbacks)` as the caller built it.
    pub struct_size: usize,
    /// Fills `*out_table` with the module's array of slot pointers and `*out_size` with its
    /// length (index 0 unused); non-zero on success.
    pub get_module_function_table: Option<
        unsafe extern "C" fn(
            module: c_int,
            out_table: *mut *mut *mut FunctionPointer,
            out_size: *mut c_uint,
        ) -> c_int,
    >,
}

/// `NvtxCallbackModule` values.
pub mod module {
    /// `NVTX_CB_MODULE_CORE`.
    pub const CORE: i32 = 1;
    /// `NVTX_CB_MODULE_CORE2`.
    pub const CORE2: i32 = 5;
}

/// `NvtxCallbackIdCore` values.
pub mod core {
    pub const MARK_EX: usize = 1;
    pub const MARK_A: usize = 2;
    pub const MARK_W: usize = 3;
    pub const RANGE_START_EX: usize = 4;
    pub const RANGE_START_A: usize = 5;
    pub const RANGE_START_W: usize = 6;
    pub const RANGE_END: usize = 7;
    pub const RANGE_PUSH_EX: usize = 8;
    pub const RANGE_PUSH_A: usize = 9;
    pub const RANGE_PUSH_W: usize = 10;
    pub const RANGE_POP: usize = 11;
    pub const NAME_CATEGORY_A: usize = 12;
    pub const NAME_CATEGORY_W: usize = 13;
    pub const NAME_OS_THREAD_A: usize = 14;
    pub const NAME_OS_THREAD_W: usize = 15;
}

/// `NvtxCallbackIdCore2` values.
pub mod core2 {
    pub const DOMAIN_MARK_EX: usize = 1;
    pub const DOMAIN_RANGE_START_EX: usize = 2;
    pub const DOMAIN_RANGE_END: usize = 3;
    pub const DOMAIN_RANGE_PUSH_EX: usize = 4;
    pub const DOMAIN_RANGE_POP: usize = 5;
    pub const DOMAIN_RESOURCE_CREATE: usize = 6;
    pub const DOMAIN_RESOURCE_DESTROY: usize = 7;
    pub const DOMAIN_NAME_CATEGORY_A: usize = 8;
    pub const DOMAIN_NAME_CATEGORY_W: usize = 9;
    pub const DOMAIN_REGISTER_STRING_A: usize = 10;
    pub const DOMAIN_REGISTER_STRING_W: usize = 11;
    pub const DOMAIN_CREATE_A: usize = 12;
    pub const DOMAIN_CREATE_W: usize = 13;
    pub const DOMAIN_DESTROY: usize = 14;
    pub const INITIALIZE: usize = 15;
}

/// `nvtxEventAttributes_t` (v2 and v3 share this 48-byte layout).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EventAttributes {
    /// `NVTX_VERSION` of the caller's headers (2 or 3).
    pub version: u16,
    /// `NVTX_EVENT_ATTRIB_STRUCT_SIZE` (48).
    pub size: u16,
    /// Category (0 = none).
    pub category: u32,
    /// `nvtxColorType_t`: 0 unknown, 1 ARGB.
    pub color_type: i32,
    /// ARGB.
    pub color: u32,
    /// `nvtxPayloadType_t`.
    pub payload_type: i32,
    /// Reserved.
    pub reserved0: i32,
    /// The 8-byte payload union, read according to `payload_type`.
    pub payload: u64,
    /// `nvtxMessageType_t`.
    pub message_type: i32,
    /// The pointer-sized message union.
    pub message: *const c_void,
}

/// `NVTX_EVENT_ATTRIB_STRUCT_SIZE`.
pub const EVENT_ATTRIB_SIZE: u16 = 48;
/// `NVTX_COLOR_ARGB`.
pub const COLOR_ARGB: i32 = 1;
/// `NVTX_MESSAGE_TYPE_ASCII`.
pub const MESSAGE_ASCII: i32 = 1;
/// `NVTX_MESSAGE_TYPE_UNICODE`.
pub const MESSAGE_UNICODE: i32 = 2;
/// `NVTX_MESSAGE_TYPE_REGISTERED`.
pub const MESSAGE_REGISTERED: i32 = 3;
/// `NVTX_NO_PUSH_POP_TRACKING`: what push and pop return when the library cannot track.
pub const NO_PUSH_POP_TRACKING: c_int = -2;

/// A C string argument.
pub type CStr = *const c_char;
/// A wide string argument.
pub type WStr = *const WChar;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn event_attributes_match_the_x86_64_layout_of_the_header() {
        assert_eq!(size_of::<EventAttributes>(), usize::from(EVENT_ATTRIB_SIZE));
        assert_eq!(offset_of!(EventAttributes, category), 4);
        assert_eq!(offset_of!(EventAttributes, color_type), 8);
        assert_eq!(offset_of!(EventAttributes, color), 12);
        assert_eq!(offset_of!(EventAttributes, payload_type), 16);
        assert_eq!(offset_of!(EventAttributes, payload), 24);
        assert_eq!(offset_of!(EventAttributes, message_type), 32);
        assert_eq!(offset_of!(EventAttributes, message), 40);
        assert_eq!(size_of::<ExportTableCallbacks>(), 16);
    }
}
