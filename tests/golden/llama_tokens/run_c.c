/* llama2.c's own tokenizer on a corpus: run.c (given as RUN_C) compiled with -DTESTING, which
   leaves out its main. For tokenizer.bin, the vocabulary size and a corpus file (each item: its
   byte count on a line, then its bytes), prints one JSON line per item: the ids of run.c's
   encode(text, bos 1, eos 0), as its generate calls it, and in hex the text its generate prints
   for them: decode(prev, id) of each id after the first, concatenated (without safe_printf's
   filter of unprintable bytes). The corpus holds no NUL: run.c reads C strings. */
#include RUN_C

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s tokenizer.bin VOCAB_SIZE CORPUS\n", argv[0]);
    return 2;
  }
  Tokenizer t;
  build_tokenizer(&t, argv[1], atoi(argv[2]));
  FILE* in = fopen(argv[3], "rb");
  if (!in) return 1;
  size_t n;
  while (fscanf(in, "%zu", &n) == 1) {
    fgetc(in); /* the newline */
    char* text = calloc(n + 1, 1);
    if (fread(text, 1, n, in) != n) return 1;
    int* ids = malloc((n + 3) * sizeof(int));
    int count = 0;
    encode(&t, text, 1, 0, ids, &count);
    printf("{\"ids\":[");
    for (int i = 0; i < count; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("],\"text\":\"");
    for (int i = 1; i < count; i++) {
      const char* piece = decode(&t, ids[i - 1], ids[i]);
      for (size_t k = 0; piece[k]; k++) printf("%02x", (unsigned char)piece[k]);
    }
    printf("\"}\n");
    free(ids);
    free(text);
  }
  free_tokenizer(&t);
  return 0;
}
