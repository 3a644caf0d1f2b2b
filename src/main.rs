//! The `mnemo` binary: a thin shell over the library's command line.

// mimalloc rather than the C library's allocator: a bundle of a subject
// with a long history spent a quarter of its time in glibc's malloc and
// free, more the larger the heap (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mnemo::cli::main()
}
