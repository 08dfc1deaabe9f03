//! `floe`: run the pipeline locally, make a demo, manage tables and dead letters.

mod bench;
mod bench_commit;
mod bench_maintain;
mod check;
mod cli;
mod deadletters;
mod demo;
mod output;
mod run;
mod s3tables;
mod tables;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    output::init_logging(&cli.log, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(cli::dispatch(cli.command));
    if std::env::var_os("FLOE_PEAK_RSS").is_some() {
        eprintln!("peak_rss_kb={}", bench::peak_rss_kb().unwrap_or(0));
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(source) = std::error::Error::source(&e) {
                eprintln!("  caused by: {source}");
            }
            std::process::ExitCode::from(if e.kind() == floe_core::ErrorKind::Config {
                2
            } else {
                1
            })
        }
    }
}
