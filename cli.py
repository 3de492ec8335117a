def main(argv=None):
    print("scenc")
    return 0
