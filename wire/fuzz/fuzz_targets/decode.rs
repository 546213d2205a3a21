//! Feeds arbitrary bytes to every p5 wire decoder: none may panic, hang or allocate beyond the
//! input's size. Run: `cd wire/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run decode` (see docs/wire.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use p5_wire::{data, frame, store};

fuzz_target!(|bytes: &[u8]| {
    for f in frame::Frames::new(bytes).flatten() {
        let _ = data::validate_client_frame(f.ty, f.body);
        let _ = store::StoreRecord::decode(f.ty, f.body);
    }
    if let Some((&ty, body)) = bytes.split_first() {
        let _ = data::validate_client_frame(ty, body);
        let _ = data::validate_client_frame(p5_wire::FrameType::Events as u8, body);
        let _ = store::StoreRecord::decode(ty | 0x80, body);
    }
    let _ = store::SegmentHeader::decode(bytes);
    let _ = p5_wire::HelloAck::decode_body(bytes);
});
