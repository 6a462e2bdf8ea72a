def main():
    print("inferlab")
