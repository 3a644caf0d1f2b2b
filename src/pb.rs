//! Generated protobuf and gRPC code for `mnemo.v1` (built by `build.rs` into
//! OUT_DIR). Nothing but the generated code and the reflection descriptor.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("mnemo.v1");

/// Encoded `FileDescriptorSet` of the contract, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("mnemo_descriptor");
