// Writes the Parquet fixtures of parquet_fixtures_test with two independent
// writers: hyparquet-writer (JavaScript) and parquet-wasm (Rust arrow-rs /
// parquet), plus rows.json, the rows they were given. Run from anywhere:
//   node verl/rl/data/parquet/testdata/make_fixtures.mjs
// Needs the npm packages hyparquet-writer, hyparquet and parquet-wasm
// (tools/setup.sh installs them globally). Output is deterministic.
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = process.env.NPM_ROOT || '/usr/local/lib/node_modules'  // tools/setup.sh's prefix
const here = dirname(fileURLToPath(import.meta.url))
const { parquetWriteBuffer } = await import(join(root, 'hyparquet-writer/src/index.js'))
const { parquetMetadata } = await import(join(root, 'hyparquet/src/index.js'))
const wasm = createRequire(import.meta.url)(join(root, 'parquet-wasm/node/parquet_wasm.js'))

// verl rows (examples/data_preprocess/gsm8k.py's schema) with nulls, empty
// and missing lists, unicode, binary image bytes and repeated strings.
const N = 13
const rows = []
for (let i = 0; i < N; i++) {
  const q = `Natalia sold clips to ${i * 7 + 3} friends. How many? ` + 'é✓'.repeat(i % 3)
  const prompt = [{ role: 'user', content: q + " Let's think step by step and output the final answer after \"####\"." }]
  if (i % 4 === 1) prompt.unshift({ role: 'system', content: 'You are a helpful assistant.' })
  if (i % 5 === 3) prompt.push({ role: 'assistant', content: null })
  const images = i % 3 === 0 ? null : i % 3 === 1 ? [] :
    [{ bytes: Uint8Array.from([i, 0, 255, 128 + i]), path: `img/${i}.png` },
     { bytes: null, path: i % 2 ? null : `img/${i}b.png` }]
  rows.push({
    data_source: i % 2 ? 'openai/gsm8k' : 'lighteval/MATH',
    prompt,
    ability: i === 5 ? null : 'math',
    reward_model: i === 8 ? null : { style: 'rule', ground_truth: String(i * 11) },
    extra_info: {
      split: i < 9 ? 'train' : 'test',
      index: 1000000000000 * (i % 2) + i,
      answer: i === 4 ? null : `${i} clips #### ${i * 11}`,
      score: i % 3 === 2 ? null : i / 4,
      need_tools_kwargs: i % 2 === 0,
    },
    images,
  })
}

const str = (name, rep = 'OPTIONAL') =>
  ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: rep })
const list = (name, n) => [
  { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', logical_type: { type: 'LIST' }, num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'OPTIONAL', num_children: n },
]
// pyarrow's schema for these rows (all fields nullable, 3-level lists).
const schema = [
  { name: 'root', num_children: 6 },
  str('data_source'),
  ...list('prompt', 2), str('role'), str('content'),
  str('ability'),
  { name: 'reward_model', repetition_type: 'OPTIONAL', num_children: 2 }, str('style'), str('ground_truth'),
  { name: 'extra_info', repetition_type: 'OPTIONAL', num_children: 5 },
  str('split'), { name: 'index', type: 'INT64', repetition_type: 'OPTIONAL' }, str('answer'),
  { name: 'score', type: 'DOUBLE', repetition_type: 'OPTIONAL' },
  { name: 'need_tools_kwargs', type: 'BOOLEAN', repetition_type: 'OPTIONAL' },
  ...list('images', 2), { name: 'bytes', type: 'BYTE_ARRAY', repetition_type: 'OPTIONAL' }, str('path'),
]
const columns = ['data_source', 'prompt', 'ability', 'reward_model', 'extra_info', 'images']
const jsRows = rows.map(r => ({ ...r, extra_info: { ...r.extra_info, index: BigInt(r.extra_info.index) } }))
const columnData = columns.map(name => ({ name, data: jsRows.map(r => r[name]) }))

const files = {}
// hyparquet-writer: data pages v2; dictionary where it halves the size.
files['hyparquet_snappy.parquet'] = parquetWriteBuffer({ columnData, schema, codec: 'SNAPPY', rowGroupSize: 5 })
files['hyparquet_uncompressed.parquet'] = parquetWriteBuffer({ columnData, schema, codec: 'UNCOMPRESSED', rowGroupSize: [4, 6], pageSize: 64 })
// Flat columns in the DELTA encodings, as hyparquet-writer emits them.
const n = rows.map((r, i) => i)
files['hyparquet_delta.parquet'] = parquetWriteBuffer({
  codec: 'UNCOMPRESSED', rowGroupSize: 7,
  columnData: [
    { name: 'i64', type: 'INT64', encoding: 'DELTA_BINARY_PACKED', data: n.map(i => BigInt(i * i * 1000003 - 5000)) },
    { name: 'i32', type: 'INT32', encoding: 'DELTA_BINARY_PACKED', data: n.map(i => (i % 3 ? -i * 77 : i * 123456)) },
    { name: 'dlba', type: 'STRING', encoding: 'DELTA_LENGTH_BYTE_ARRAY', data: rows.map(r => r.extra_info.answer) },
    { name: 'dba', type: 'STRING', encoding: 'DELTA_BYTE_ARRAY', data: rows.map(r => r.prompt.at(-1).content) },
  ],
})
const deltaRows = rows.map((r, i) => ({
  i64: i * i * 1000003 - 5000, i32: i % 3 ? -i * 77 : i * 123456,
  dlba: r.extra_info.answer, dba: r.prompt.at(-1).content,
}))

// MAP, lists of lists, REQUIRED and unsigned columns.
const mapRows = [
  { id: 1, m: { a: 1, b: 2 }, nested: [[1, 2], [], null, [3]], u: 4000000000 },
  { id: 2, m: {}, nested: [], u: 0 },
  { id: 3, m: null, nested: null, u: 7 },
  { id: 4, m: { c: null }, nested: [[null, -5]], u: 4294967295 },
]
const mapSchema = [
  { name: 'root', num_children: 4 },
  { name: 'id', type: 'INT32', repetition_type: 'REQUIRED' },
  { name: 'm', repetition_type: 'OPTIONAL', converted_type: 'MAP', num_children: 1 },
  { name: 'key_value', repetition_type: 'REPEATED', num_children: 2 },
  { name: 'key', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
  { name: 'value', type: 'INT32', repetition_type: 'OPTIONAL' },
  { name: 'nested', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', type: 'INT64', repetition_type: 'OPTIONAL' },
  { name: 'u', type: 'INT32', converted_type: 'UINT_32', repetition_type: 'REQUIRED' },
]
const bigNested = r => ({ ...r, nested: r.nested && r.nested.map(l => l && l.map(x => x === null ? null : BigInt(x))) })
files['hyparquet_map_nested.parquet'] = parquetWriteBuffer({
  schema: mapSchema, codec: 'SNAPPY', rowGroupSize: 3,
  columnData: ['id', 'm', 'nested', 'u'].map(name => ({ name, data: mapRows.map(bigNested).map(r => r[name]) })),
})

// parquet-wasm (arrow-rs): re-encode the hyparquet file with other settings.
function arrow(name, configure) {
  const table = wasm.readParquet(new Uint8Array(files['hyparquet_snappy.parquet']))
  const props = configure(new wasm.WriterPropertiesBuilder().setCreatedBy('parquet-wasm')).build()
  files[name] = wasm.writeParquet(table, props)
}
const C = wasm.Compression, E = wasm.Encoding, V = wasm.WriterVersion
arrow('arrow_zstd_dict.parquet', b => b.setCompression(C.ZSTD).setMaxRowGroupSize(4))
arrow('arrow_gzip_plain.parquet', b => b.setCompression(C.GZIP).setDictionaryEnabled(false).setMaxRowGroupSize(6))
arrow('arrow_brotli_v2.parquet', b => b.setCompression(C.BROTLI).setWriterVersion(V.V2).setMaxRowGroupSize(13))
arrow('arrow_snappy_v2_plain.parquet', b => b.setCompression(C.SNAPPY).setWriterVersion(V.V2).setDictionaryEnabled(false))
arrow('arrow_uncompressed_delta.parquet', b => b.setCompression(C.UNCOMPRESSED).setDictionaryEnabled(false)
  .setWriterVersion(V.V2).setMaxRowGroupSize(5)
  .setColumnEncoding('extra_info.index', E.DELTA_BINARY_PACKED)
  .setColumnEncoding('prompt.list.element.content', E.DELTA_BYTE_ARRAY)
  .setColumnEncoding('extra_info.answer', E.DELTA_LENGTH_BYTE_ARRAY)
  .setColumnEncoding('extra_info.score', E.BYTE_STREAM_SPLIT))

// Expected rows: binary values as "hex:<bytes>" (the test maps json binary
// the same way).
const hex = b => 'hex:' + Buffer.from(b).toString('hex')
const expected = rows.map(r => ({
  ...r,
  images: r.images && r.images.map(im => ({ bytes: im.bytes && hex(im.bytes), path: im.path })),
}))
writeFileSync(join(here, 'rows.json'), JSON.stringify(expected, null, 1) + '\n')
writeFileSync(join(here, 'delta_rows.json'), JSON.stringify(deltaRows, null, 1) + '\n')
writeFileSync(join(here, 'map_rows.json'), JSON.stringify(mapRows, null, 1) + '\n')
for (const [name, buf] of Object.entries(files)) {
  const bytes = new Uint8Array(buf)
  writeFileSync(join(here, name), bytes)
  const md = parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length))
  const encodings = new Set(), codecs = new Set(), pages = new Set()
  for (const rg of md.row_groups) {
    for (const c of rg.columns) {
      c.meta_data.encodings.forEach(e => encodings.add(e))
      codecs.add(c.meta_data.codec)
      for (const s of c.meta_data.encoding_stats || []) pages.add(s.page_type)
    }
  }
  console.log(`${name}: ${bytes.length} bytes, ${md.row_groups.length} row groups, ` +
    `codecs ${[...codecs]}, encodings ${[...encodings]}, pages ${[...pages]}`)
}
