//! The messages of Perfetto's `perfetto_trace.proto` that ingero writes and reads, each field
//! declared once: its Rust name, its upstream field number (as an associated constant, such as
//! [`TracePacket::TIMESTAMP`]), its Rust type and its protobuf type.
//!
//! Everything that needs a field number takes it from here: the prost structs generated from
//! the same rows, the hand encoders (`proto::encode`, `write::encode`), the reader's general
//! scanner and its fast path, and the tag bytes built from them with [`super::key1`] and
//! [`super::key2`]. A test compares every constant with what prost writes for its field.
//!
//! Only the fields used are declared: protobuf skips unknown fields, so a file written with
//! this subset is a valid Perfetto trace and a full Perfetto trace still decodes here (the
//! extra fields are ignored). `oneof`s are declared as separate optional fields, which has the
//! same wire format.

/// Declares messages: one row per field, `CONST name = number: RustType [prost type];`,
/// generating the prost struct and one `pub const CONST: u32 = number` per field.
macro_rules! messages {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            $( $(#[$fdoc:meta])* $konst:ident $field:ident = $num:tt : $ty:ty [$($kind:tt)*]; )*
        }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, PartialEq, prost::Message)]
            pub struct $name {
                $( $(#[$fdoc])* #[prost($($kind)*, tag = $num)] pub $field: $ty, )*
            }

            impl $name {
                $(
                    #[doc = concat!("Field number of `", stringify!($name), ".",
                        stringify!($field), "`.")]
                    pub const $konst: u32 = $num;
                )*
            }
        )*

        /// Every declared field as `(message, field, number)`, for the table's tests.
        #[cfg(test)]
        pub(crate) const ALL_FIELDS: &[(&str, &str, u32)] = &[
            $( $( (stringify!($name), stringify!($field), $num), )* )*
        ];
    };
}

messages! {
    /// A whole trace file: a sequence of `packet` fields.
    Trace {
        /// The packets, in file order.
        PACKET packet = 1: Vec<TracePacket> [message, repeated];
    }

    /// One packet: a timestamped event, descriptor or snapshot on a packet sequence.
    TracePacket {
        /// When the packet happened, on `timestamp_clock_id`'s clock (else the sequence's
        /// default clock): for ingero, nanosecond deltas on the incremental MONOTONIC clock
        /// (main sequence) or absolute MONOTONIC ns (late sequence).
        TIMESTAMP timestamp = 8: Option<u64> [uint64, optional];
        /// The clock `timestamp` is on (a [`super::clock_id`] value).
        TIMESTAMP_CLOCK_ID timestamp_clock_id = 58: Option<u32> [uint32, optional];
        /// The packet sequence (writer) this packet belongs to: interned data and
        /// incremental clocks are scoped to one sequence.
        TRUSTED_PACKET_SEQUENCE_ID trusted_packet_sequence_id = 10: Option<u32>
            [uint32, optional];
        /// [`super::SEQ_INCREMENTAL_STATE_CLEARED`] and/or
        /// [`super::SEQ_NEEDS_INCREMENTAL_STATE`].
        SEQUENCE_FLAGS sequence_flags = 13: Option<u32> [uint32, optional];
        /// Set on a sequence's first packet in a file (not when ingero restarts the
        /// sequence within the file).
        FIRST_PACKET_ON_SEQUENCE first_packet_on_sequence = 87: Option<bool> [bool, optional];
        /// Event names, categories, argument keys and string values given iids for the
        /// packets after this one on the sequence.
        INTERNED_DATA interned_data = 12: Option<InternedData> [message, optional];
        /// Defaults for the sequence's later packets (their clock, their track).
        TRACE_PACKET_DEFAULTS trace_packet_defaults = 59: Option<TracePacketDefaults>
            [message, optional];
        /// Readings of several clocks at one moment, which relate them to each other.
        CLOCK_SNAPSHOT clock_snapshot = 6: Option<ClockSnapshot> [message, optional];
        /// Describes a track (a process, thread, counter or named track) before use.
        TRACK_DESCRIPTOR track_descriptor = 60: Option<TrackDescriptor> [message, optional];
        /// A slice begin or end, an instant or a counter value.
        TRACK_EVENT track_event = 11: Option<TrackEvent> [message, optional];
        /// A zlib stream of more packets (`Trace.packet` fields), which readers expand in
        /// place; the writer's chunks (`write::chunk`).
        COMPRESSED_PACKETS compressed_packets = 50: Option<Vec<u8>> [bytes = "vec", optional];
        /// The recording host, which tells hosts apart when traces are merged.
        MACHINE_ID machine_id = 98: Option<u32> [uint32, optional];
        /// What the recording host is: its name among merged traces' machines, its kernel.
        SYSTEM_INFO system_info = 45: Option<SystemInfo> [message, optional];
    }

    /// The recording host's description (at the start of every file).
    SystemInfo {
        /// The kernel's `uname` fields.
        UTSNAME utsname = 1: Option<Utsname> [message, optional];
        /// The host's name among the machines of a merged trace (Perfetto v58+ names its
        /// `machine` rows by it).
        MACHINE_NAME machine_name = 17: Option<String> [string, optional];
    }

    /// `uname(2)`'s fields, those ingero fills in.
    Utsname {
        /// The kernel's name (`Linux`).
        SYSNAME sysname = 1: Option<String> [string, optional];
        /// The kernel release (`6.8.0-45-generic`).
        RELEASE release = 3: Option<String> [string, optional];
        /// The hardware (`x86_64`).
        MACHINE machine = 4: Option<String> [string, optional];
    }

    /// Defaults a sequence's packets take when they do not set the field themselves.
    TracePacketDefaults {
        /// The clock of the packets' timestamps (64, incremental MONOTONIC, on the main
        /// sequence; 3, MONOTONIC, on the late one).
        TIMESTAMP_CLOCK_ID timestamp_clock_id = 58: Option<u32> [uint32, optional];
        /// Defaults of the packets' track events.
        TRACK_EVENT_DEFAULTS track_event_defaults = 11: Option<TrackEventDefaults>
            [message, optional];
    }

    /// Defaults of a sequence's track events.
    TrackEventDefaults {
        /// The track of events that name none.
        TRACK_UUID track_uuid = 11: Option<u64> [uint64, optional];
    }

    /// Several clocks read at one moment.
    ClockSnapshot {
        /// One reading per clock.
        CLOCKS clocks = 1: Vec<Clock> [message, repeated];
    }

    /// One clock's reading in a [`ClockSnapshot`].
    Clock {
        /// Which clock (a [`super::clock_id`] value).
        CLOCK_ID clock_id = 1: Option<u32> [uint32, optional];
        /// Its reading, in nanoseconds.
        TIMESTAMP timestamp = 2: Option<u64> [uint64, optional];
        /// The clock's timestamps are deltas from the sequence's previous one.
        IS_INCREMENTAL is_incremental = 3: Option<bool> [bool, optional];
    }

    /// Strings given iids, valid on their sequence until its incremental state is cleared.
    InternedData {
        /// Event categories.
        EVENT_CATEGORIES event_categories = 1: Vec<EventCategory> [message, repeated];
        /// Event names.
        EVENT_NAMES event_names = 2: Vec<EventName> [message, repeated];
        /// Argument (debug annotation) keys.
        DEBUG_ANNOTATION_NAMES debug_annotation_names = 3: Vec<DebugAnnotationName>
            [message, repeated];
        /// Argument string values.
        DEBUG_ANNOTATION_STRING_VALUES debug_annotation_string_values = 29: Vec<InternedString>
            [message, repeated];
    }

    /// An interned category.
    EventCategory {
        /// The id events refer to it by.
        IID iid = 1: Option<u64> [uint64, optional];
        /// The category (`sched`).
        NAME name = 2: Option<String> [string, optional];
    }

    /// An interned event name.
    EventName {
        /// The id events refer to it by.
        IID iid = 1: Option<u64> [uint64, optional];
        /// The name (`cudaMalloc`).
        NAME name = 2: Option<String> [string, optional];
    }

    /// An interned argument key.
    DebugAnnotationName {
        /// The id arguments refer to it by.
        IID iid = 1: Option<u64> [uint64, optional];
        /// The key (`size`, `labels.step`).
        NAME name = 2: Option<String> [string, optional];
    }

    /// An interned string value.
    InternedString {
        /// The id arguments refer to it by.
        IID iid = 1: Option<u64> [uint64, optional];
        /// The string's bytes (UTF-8 as ingero writes them).
        STR str = 2: Option<Vec<u8>> [bytes = "vec", optional];
    }

    /// Describes a track: what it is, its name and its parent.
    TrackDescriptor {
        /// The id events name the track by.
        UUID uuid = 1: Option<u64> [uint64, optional];
        /// The track it is nested under (a thread's off-CPU track under the thread).
        PARENT_UUID parent_uuid = 5: Option<u64> [uint64, optional];
        /// The track's name, for tracks that are neither a process nor a thread.
        NAME name = 2: Option<String> [string, optional];
        /// Set when the track is a process.
        PROCESS process = 3: Option<ProcessDescriptor> [message, optional];
        /// Set when the track is a thread.
        THREAD thread = 4: Option<ThreadDescriptor> [message, optional];
        /// Set when the track is a counter.
        COUNTER counter = 8: Option<CounterDescriptor> [message, optional];
        /// How the UI orders the child tracks (a `ChildTracksOrdering` value).
        CHILD_ORDERING child_ordering = 11: Option<i32> [int32, optional];
    }

    /// A process track's identity.
    ProcessDescriptor {
        /// The process id.
        PID pid = 1: Option<i32> [int32, optional];
        /// The command line, one argument per entry.
        CMDLINE cmdline = 2: Vec<String> [string, repeated];
        /// The process's name.
        PROCESS_NAME process_name = 6: Option<String> [string, optional];
        /// Words the UI shows beside the name (`rank 3`).
        PROCESS_LABELS process_labels = 8: Vec<String> [string, repeated];
    }

    /// A thread track's identity.
    ThreadDescriptor {
        /// The process id.
        PID pid = 1: Option<i32> [int32, optional];
        /// The thread id.
        TID tid = 2: Option<i32> [int32, optional];
        /// The thread's name.
        THREAD_NAME thread_name = 5: Option<String> [string, optional];
    }

    /// A counter track's properties.
    CounterDescriptor {
        /// The unit of its values (a [`super::counter_unit`] value).
        UNIT unit = 3: Option<i32> [int32, optional];
    }

    /// An event on a track: a slice begin or end, an instant or a counter value.
    TrackEvent {
        /// What kind of event (a [`super::event_type`] value).
        TYPE r#type = 9: Option<i32> [int32, optional];
        /// The track it is on (else the sequence's default track).
        TRACK_UUID track_uuid = 11: Option<u64> [uint64, optional];
        /// The event's interned name.
        NAME_IID name_iid = 10: Option<u64> [uint64, optional];
        /// The event's name, not interned.
        NAME name = 23: Option<String> [string, optional];
        /// The event's interned categories.
        CATEGORY_IIDS category_iids = 3: Vec<u64> [uint64, repeated, packed = "false"];
        /// The event's arguments.
        DEBUG_ANNOTATIONS debug_annotations = 4: Vec<DebugAnnotation> [message, repeated];
        /// A counter event's value.
        COUNTER_VALUE counter_value = 30: Option<i64> [int64, optional];
        /// Flows the event is on: slices with one flow id are joined by arrows in time order
        /// (the calls that make up one NCCL collective, on every rank).
        FLOW_IDS flow_ids = 47: Vec<u64> [fixed64, repeated, packed = "false"];
    }

    /// One argument of an event: a key and one value.
    DebugAnnotation {
        /// The key, interned.
        NAME_IID name_iid = 1: Option<u64> [uint64, optional];
        /// The key, not interned.
        NAME name = 10: Option<String> [string, optional];
        /// A boolean value.
        BOOL_VALUE bool_value = 2: Option<bool> [bool, optional];
        /// An unsigned value.
        UINT_VALUE uint_value = 3: Option<u64> [uint64, optional];
        /// A signed value.
        INT_VALUE int_value = 4: Option<i64> [int64, optional];
        /// A floating-point value.
        DOUBLE_VALUE double_value = 5: Option<f64> [double, optional];
        /// A string value, not interned.
        STRING_VALUE string_value = 6: Option<String> [string, optional];
        /// A pointer or handle value (shown in hex).
        POINTER_VALUE pointer_value = 7: Option<u64> [uint64, optional];
        /// A string value, interned.
        STRING_VALUE_IID string_value_iid = 17: Option<u64> [uint64, optional];
    }
}

impl InternedData {
    /// Whether it interns nothing (a packet then needs no `interned_data`).
    pub fn is_empty(&self) -> bool {
        self.event_categories.is_empty()
            && self.event_names.is_empty()
            && self.debug_annotation_names.is_empty()
            && self.debug_annotation_string_values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::scan::Cur;
    use prost::Message;

    /// The first field number in `bytes`.
    fn first_field(bytes: &[u8]) -> u32 {
        Cur::new(bytes)
            .field()
            .ok()
            .flatten()
            .map_or(0, |(num, _)| num)
    }

    /// Each message with exactly one field set, encoded by prost: the number prost writes must
    /// be the table's constant (which is also what the prost attribute says, since both come
    /// from one row; this guards the macro itself).
    #[test]
    fn prost_writes_each_field_under_its_constant() {
        let te = |t: TrackEvent| t.encode_to_vec();
        let da = |d: DebugAnnotation| d.encode_to_vec();
        let p = |p: TracePacket| p.encode_to_vec();
        let cases: Vec<(Vec<u8>, u32)> = vec![
            (
                p(TracePacket {
                    timestamp: Some(1),
                    ..Default::default()
                }),
                TracePacket::TIMESTAMP,
            ),
            (
                p(TracePacket {
                    compressed_packets: Some(vec![1]),
                    ..Default::default()
                }),
                TracePacket::COMPRESSED_PACKETS,
            ),
            (
                p(TracePacket {
                    machine_id: Some(1),
                    ..Default::default()
                }),
                TracePacket::MACHINE_ID,
            ),
            (
                p(TracePacket {
                    system_info: Some(SystemInfo {
                        utsname: None,
                        machine_name: None,
                    }),
                    ..Default::default()
                }),
                TracePacket::SYSTEM_INFO,
            ),
            (
                SystemInfo {
                    utsname: None,
                    machine_name: Some("h".into()),
                }
                .encode_to_vec(),
                SystemInfo::MACHINE_NAME,
            ),
            (
                te(TrackEvent {
                    counter_value: Some(1),
                    ..Default::default()
                }),
                TrackEvent::COUNTER_VALUE,
            ),
            (
                te(TrackEvent {
                    category_iids: vec![1],
                    ..Default::default()
                }),
                TrackEvent::CATEGORY_IIDS,
            ),
            (
                da(DebugAnnotation {
                    string_value_iid: Some(1),
                    ..Default::default()
                }),
                DebugAnnotation::STRING_VALUE_IID,
            ),
            (
                Trace {
                    packet: vec![TracePacket::default()],
                }
                .encode_to_vec(),
                Trace::PACKET,
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(first_field(&bytes), want, "{bytes:x?}");
        }
    }

    #[test]
    fn field_numbers_are_unique_within_each_message() {
        for (i, (m, f, n)) in ALL_FIELDS.iter().enumerate() {
            assert!((1..(1 << 29)).contains(n), "{m}.{f}");
            for (m2, f2, n2) in &ALL_FIELDS[i + 1..] {
                assert!(m != m2 || n != n2, "{m}.{f} and {m2}.{f2} share {n}");
            }
        }
    }
}
