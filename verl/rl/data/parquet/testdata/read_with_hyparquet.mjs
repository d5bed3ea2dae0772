// Independent read-back of a Parquet file for parquet_writer_test: prints
// {"rows": [...], "arrow_rows": N} where rows come from hyparquet (INT64 as
// numbers, bytes as "hex:<bytes>") and arrow_rows is the row count
// parquet-wasm (arrow-rs) reads. usage: node read_with_hyparquet.mjs FILE
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

const root = process.env.NPM_ROOT || '/usr/local/lib/node_modules'
const { parquetReadObjects } = await import(join(root, 'hyparquet/src/index.js'))
const wasm = createRequire(import.meta.url)(join(root, 'parquet-wasm/node/parquet_wasm.js'))
const bytes = readFileSync(process.argv[2])
const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)
const rows = await parquetReadObjects({ file, utf8: false })
const table = wasm.readParquet(new Uint8Array(bytes))
const arrowRows = table.recordBatches().reduce((n, b) => n + b.numRows, 0)
const plain = v => typeof v === 'bigint' ? Number(v)
  : v instanceof Uint8Array ? 'hex:' + Buffer.from(v).toString('hex')
  : Array.isArray(v) ? v.map(plain)
  : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
  : v
console.log(JSON.stringify({ rows: plain(rows), arrow_rows: arrowRows }))
